-- pgTAP: the shard halves of a cross-shard fork and of a thread move
-- (docs/architecture.md "Cross-shard fork and thread moves";
-- docs/contract/checkpoint-store.md §7 for the fork's contract).
-- On one database: the source document is exported here and imported here
-- under another destination thread, which is what the destination shard
-- sees. The router end to end (two shards) is test/shards/cross_shard.sh.
-- Cases: XF1 (F1 through the import), XF3-XF10 (F3-F10 with the source given
-- as data), XS3 (S3), XB1-XB3 (blobs on the destination), XM1-XM9 (moves).
BEGIN;
SELECT plan(78);
SELECT sandbox_persist._reset_for_tests();

-- 'SQLSTATE CODE_NAME' of the error a statement raises ('no error' if none).
CREATE FUNCTION pg_temp.sp(sql text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    st text; det text;
BEGIN
    EXECUTE sql;
    RETURN 'no error';
EXCEPTION WHEN OTHERS THEN
    GET STACKED DIAGNOSTICS st = RETURNED_SQLSTATE, det = PG_EXCEPTION_DETAIL;
    RETURN st || ' ' || coalesce((SELECT c->>'codeName' FROM json_array_elements(sandbox_persist.error_codes()) c WHERE c->>'sqlstate' = st AND coalesce(det, '') !~ '^[A-Z][A-Z0-9_]+: '), CASE WHEN st LIKE 'SP%' THEN '<detail: ' || coalesce(det, 'none') || '>' ELSE split_part(coalesce(det, ''), ':', 1) END);
END
$$;

-- Content-addressed keys of real bytes (blob_put verifies them).
CREATE FUNCTION pg_temp.fk(body text) RETURNS text LANGUAGE sql AS $$
    SELECT 'sandbox-files/sha256/' || encode(sha256(convert_to(body, 'UTF8')), 'hex')
$$;
CREATE FUNCTION pg_temp.ak(body text) RETURNS text LANGUAGE sql AS $$
    SELECT 'sandbox-artifacts/sha256/' || encode(sha256(convert_to(body, 'UTF8')), 'hex')
$$;

-- The export row as the one document the import takes (what the router sends).
CREATE FUNCTION pg_temp.export_doc(id text) RETURNS json LANGUAGE sql AS $$
    SELECT json_build_object('checkpoint', e.checkpoint, 'referencesComplete', e.references_complete,
                             'blobKeys', to_json(e.blob_keys), 'absentBlobKeys', to_json(e.absent_blob_keys))
      FROM sandbox_persist._checkpoint_export_fork(id) e
$$;

CREATE TEMP TABLE w (name text PRIMARY KEY, writer json NOT NULL);
CREATE FUNCTION pg_temp.acquire(name text, thread text) RETURNS json LANGUAGE sql AS $$
    INSERT INTO w VALUES (name, sandbox_persist.checkpoint_acquire_writer(thread))
    ON CONFLICT (name) DO UPDATE SET writer = EXCLUDED.writer
    RETURNING writer
$$;
CREATE FUNCTION pg_temp.wr(name text) RETURNS json LANGUAGE sql AS $$
    SELECT writer FROM w WHERE w.name = wr.name
$$;

-- Everything a reader of a thread sees, through the store functions.
CREATE FUNCTION pg_temp.reads(t text) RETURNS text LANGUAGE sql AS $$
    SELECT json_build_object(
        'transcript', sandbox_persist.message_load_thread(t),
        'head', sandbox_persist.checkpoint_get_head(t),
        'checkpoints', sandbox_persist.checkpoint_list(t),
        'runs', sandbox_persist.run_list_by_thread(t),
        'interrupts', sandbox_persist.interrupt_list(t),
        'generation', sandbox_persist.generation_run_find_latest_for_thread(t),
        'generationRuns', (SELECT json_agg(sandbox_persist.generation_run_get(run_id) ORDER BY seq)
                             FROM sandbox_persist.generation_runs g WHERE g.thread_id = t),
        'artifacts', sandbox_persist.artifact_list_for_thread(t),
        'references', sandbox_persist.checkpoint_list_blob_references(),
        'fence', (SELECT fence FROM sandbox_persist.checkpoint_threads x WHERE x.thread_id = t))::text
$$;
CREATE FUNCTION pg_temp.owned(t text) RETURNS bigint LANGUAGE sql AS $$
    SELECT count(*) FROM sandbox_persist.thread_owned_state s WHERE s.thread_id = t
$$;

-- The source thread: blobs stored, a root and a child checkpoint (a file
-- key shared by both, an artifact key), a transcript.
SELECT sandbox_persist.blob_put(pg_temp.fk('alpha'), convert_to('alpha', 'UTF8'));
SELECT sandbox_persist.blob_put(pg_temp.fk('beta'), convert_to('beta', 'UTF8'));
SELECT sandbox_persist.blob_put(pg_temp.ak('art'), convert_to('art', 'UTF8'));
SELECT pg_temp.acquire('src', 'src');
SELECT sandbox_persist.checkpoint_append(json_build_object(
    'checkpoint', json_build_object('id', 'c-root', 'threadId', 'src', 'createdAt', 1,
        'reason', 'named', 'label', 'first', 'sourceRunId', 'run-1',
        'files', json_build_array(
            json_build_object('path', 'a.txt', 'kind', 'file', 'blobKey', pg_temp.fk('alpha'), 'size', 5),
            json_build_object('path', 'd', 'kind', 'dir')),
        'artifacts', '[]'::json),
    'expectedHeadId', NULL, 'writer', pg_temp.wr('src')),
    '[{"role":"user","content":"one \u0000 two"}]');
SELECT sandbox_persist.checkpoint_append(json_build_object(
    'checkpoint', json_build_object('id', 'c-child', 'threadId', 'src', 'parentCheckpointId', 'c-root',
        'createdAt', 2.5, 'reason', 'automatic',
        'files', json_build_array(
            json_build_object('path', 'a.txt', 'kind', 'file', 'blobKey', pg_temp.fk('alpha'), 'size', 5),
            json_build_object('path', 'b.txt', 'kind', 'file', 'blobKey', pg_temp.fk('beta'), 'size', 4)),
        'artifacts', json_build_array(json_build_object('artifactId', 'art-1', 'name', 'x.png',
            'mimeType', 'image/png', 'size', 3, 'blobKey', pg_temp.ak('art'), 'createdAt', 2))),
    'expectedHeadId', 'c-root', 'writer', pg_temp.wr('src')),
    '[{"role":"user","content":"one \u00e9 two"},{"role":"assistant", "content":"three"}]');
SELECT sandbox_persist.message_save_thread('src', '[{"role":"user","content":"latest"}]');

------------------------------------------------------------------------------
-- The export.
------------------------------------------------------------------------------
SELECT is((SELECT count(*) FROM sandbox_persist._checkpoint_export_fork('nope')), 0::bigint,
          'XF3 export of a missing checkpoint has no row');
SELECT is((SELECT checkpoint::text FROM sandbox_persist._checkpoint_export_fork('c-child')),
          sandbox_persist.checkpoint_get('c-child')::text,
          'export carries the checkpoint exactly as checkpoint_get returns it');
SELECT is(pg_temp.export_doc('c-child')::jsonb - 'checkpoint',
          jsonb_build_object('referencesComplete', true,
                             'blobKeys', (SELECT jsonb_agg(k ORDER BY k) FROM unnest(ARRAY[
                                 pg_temp.fk('alpha'), pg_temp.fk('beta'), pg_temp.ak('art')]) k),
                             'absentBlobKeys', '[]'::jsonb),
          'export lists the distinct keys, none absent, references complete');

------------------------------------------------------------------------------
-- The import, against a local fork of the same source.
------------------------------------------------------------------------------
CREATE FUNCTION pg_temp.fork_input(dest text, dest_id text, writer json, overrides jsonb DEFAULT '{}')
RETURNS json LANGUAGE sql AS $$
    SELECT (jsonb_build_object('sourceThreadId', 'src', 'sourceCheckpointId', 'c-child',
        'destinationThreadId', dest, 'destinationCheckpointId', dest_id,
        'createdAt', 30, 'writer', writer) || overrides)::json
$$;
CREATE FUNCTION pg_temp.import_sql(dest text, writer json, overrides jsonb DEFAULT '{}',
                                   source json DEFAULT pg_temp.export_doc('c-child'))
RETURNS text LANGUAGE sql AS $$
    SELECT format('SELECT sandbox_persist._checkpoint_import_fork(%L::json, %L::json)',
                  pg_temp.fork_input(dest, 'fork-' || dest, writer, overrides), source)
$$;

SELECT pg_temp.acquire('local', 'local');
SELECT pg_temp.acquire('remote', 'remote');
SELECT sandbox_persist.checkpoint_fork_from_checkpoint(pg_temp.fork_input('local', 'fork-x', pg_temp.wr('local')));
CREATE TEMP TABLE refs_before AS SELECT sandbox_persist.checkpoint_list_blob_references()::text AS r;
SELECT is(
    (SELECT (sandbox_persist._checkpoint_import_fork(
        pg_temp.fork_input('remote', 'fork-y', pg_temp.wr('remote')),
        pg_temp.export_doc('c-child'))->'checkpoint')::jsonb - 'id' - 'threadId')::text,
    (sandbox_persist.checkpoint_get('fork-x')::jsonb - 'id' - 'threadId')::text,
    'XF1 the imported root equals the local fork root (no label, no source run)');
SELECT is(sandbox_persist.checkpoint_get('fork-y')::text,
          replace(replace(sandbox_persist.checkpoint_get('fork-x')::text, '"fork-x"', '"fork-y"'),
                  '"local"', '"remote"'),
          'XF1 read back byte for byte as the local fork root');
SELECT is(sandbox_persist.message_load_thread('remote')::text,
          sandbox_persist.message_load_thread('local')::text,
          'XF1 destination transcript = the source checkpoint''s conversation');
SELECT is(sandbox_persist.checkpoint_get_head('remote'), 'fork-y', 'XF1 destination head is the root');
SELECT is((SELECT json_object_agg(e->>'key', (e->>'references')::int)::jsonb
             FROM json_array_elements(sandbox_persist.checkpoint_list_blob_references()) e),
          jsonb_build_object(pg_temp.fk('alpha'), 4, pg_temp.fk('beta'), 3, pg_temp.ak('art'), 3),
          'XB1 one reference per distinct key, as the local fork counts');
SELECT is(sandbox_persist.message_load_thread('src')::text, '[{"role":"user","content":"latest"}]',
          'the source transcript is untouched');

-- Every contract error of the local fork, in its order, changing nothing.
SELECT pg_temp.acquire('d', 'dest');
CREATE TEMP TABLE before AS SELECT pg_temp.reads('dest') AS r, pg_temp.reads('src') AS s;
SELECT is(pg_temp.sp(pg_temp.import_sql('dest', pg_temp.wr('d'), '{"sourceThreadId":""}')),
          'SP007 SANDBOX_SNAPSHOT_INVALID_ID', 'XF identities: empty source thread is SP007');
SELECT is(pg_temp.sp(pg_temp.import_sql('dest', pg_temp.wr('d'), '{"destinationCheckpointId":7}')),
          'SP007 SANDBOX_SNAPSHOT_INVALID_ID', 'XF identities: numeric destination id is SP007');
SELECT is(pg_temp.sp(pg_temp.import_sql('dest', '{"threadId":""}')),
          'SP007 SANDBOX_SNAPSHOT_INVALID_ID', 'XF identities: writer.threadId is SP007');
SELECT is(pg_temp.sp(pg_temp.import_sql('dest', pg_temp.wr('d'), '{"createdAt":null}')),
          'SP008 SANDBOX_SNAPSHOT_INVALID_ENTRY', 'XF createdAt null (NaN) is SP008');
SELECT is(pg_temp.sp(pg_temp.import_sql('src', pg_temp.wr('src'))),
          'SP010 SANDBOX_SNAPSHOT_FORK_SOURCE_THREAD_MISMATCH', 'XF5 destination = source thread is SP010');
SELECT is(pg_temp.sp(pg_temp.import_sql('dest', pg_temp.wr('d'), '{}', NULL)),
          'SP009 SANDBOX_SNAPSHOT_FORK_SOURCE_NOT_FOUND', 'XF3 no source (SQL NULL) is SP009');
SELECT is(pg_temp.sp(pg_temp.import_sql('dest', pg_temp.wr('d'), '{}', 'null')),
          'SP009 SANDBOX_SNAPSHOT_FORK_SOURCE_NOT_FOUND', 'XF3 no source (JSON null) is SP009');
SELECT is(pg_temp.sp(pg_temp.import_sql('dest', pg_temp.wr('d'), '{}',
                                        pg_temp.export_doc('c-root'))),
          'SP009 SANDBOX_SNAPSHOT_FORK_SOURCE_NOT_FOUND', 'XF3 a document of another checkpoint is SP009');
SELECT is(pg_temp.sp(pg_temp.import_sql('dest', pg_temp.wr('d'), '{"sourceThreadId":"other"}')),
          'SP010 SANDBOX_SNAPSHOT_FORK_SOURCE_THREAD_MISMATCH', 'XF4 a source thread not owning it is SP010');
SELECT is(pg_temp.sp(pg_temp.import_sql('dest',
              '{"threadId":"dest","ownerToken":"00000000-0000-0000-0000-000000000000","fence":1}')),
          'SP006 SANDBOX_SNAPSHOT_WRITER_LOST', 'XF6 a fabricated writer is SP006');
SELECT is(pg_temp.sp(pg_temp.import_sql('dest', pg_temp.wr('remote'))),
          'SP006 SANDBOX_SNAPSHOT_WRITER_LOST', 'XF7 another thread''s lease is SP006');
SELECT pg_temp.acquire('rel', 'released');
SELECT sandbox_persist.checkpoint_release_writer(pg_temp.wr('rel'));
SELECT is(pg_temp.sp(pg_temp.import_sql('released', pg_temp.wr('rel'))),
          'SP006 SANDBOX_SNAPSHOT_WRITER_LOST', 'XF8 a released destination lease is SP006');
SELECT is(pg_temp.sp(pg_temp.import_sql('dest', pg_temp.wr('d'), '{"destinationCheckpointId":"c-root"}')),
          'SP011 SANDBOX_SNAPSHOT_FORK_DESTINATION_NOT_EMPTY', 'XF10 a destination id used elsewhere is SP011');
SELECT is(pg_temp.sp(pg_temp.import_sql('dest', pg_temp.wr('d'), '{}',
              (pg_temp.export_doc('c-child')::jsonb || '{"destinationIdTaken":true}')::json)),
          'SP011 SANDBOX_SNAPSHOT_FORK_DESTINATION_NOT_EMPTY', 'XF10 a destination id the router found on another shard is SP011');
SELECT is(pg_temp.sp(pg_temp.import_sql('dest', pg_temp.wr('remote'), '{}',
              (pg_temp.export_doc('c-child')::jsonb || '{"destinationIdTaken":true}')::json)),
          'SP006 SANDBOX_SNAPSHOT_WRITER_LOST', 'XF10 ... but only after the lease check');
SELECT is(pg_temp.sp(pg_temp.import_sql('dest', pg_temp.wr('d'), '{}',
              (pg_temp.export_doc('c-child')::jsonb
               || '{"referencesComplete":false}')::json)),
          'SP008 SANDBOX_SNAPSHOT_INVALID_ENTRY', 'XS3 source reference rows incomplete is SP008');
SELECT is(pg_temp.sp(pg_temp.import_sql('dest', pg_temp.wr('d'), '{}',
              jsonb_set(pg_temp.export_doc('c-child')::jsonb,
                        '{checkpoint,files,0,path}', '"../x"')::json)),
          'SP008 SANDBOX_SNAPSHOT_INVALID_ENTRY', 'XF corrupt source entries are SP008');
-- XB2: a key the source holds but this shard lacks
SELECT is(pg_temp.sp(pg_temp.import_sql('dest', pg_temp.wr('d'), '{}',
              jsonb_set(pg_temp.export_doc('c-child')::jsonb,
                        '{checkpoint,files,1,blobKey}', to_jsonb(pg_temp.fk('gamma')))::json)),
          'SP015 SANDBOX_SNAPSHOT_FORK_BLOB_MISSING', 'XB2 a referenced blob missing here is SP015');
SELECT is(pg_temp.reads('dest'), (SELECT r FROM before), 'the failed imports left the destination unchanged');
SELECT is(pg_temp.reads('src'), (SELECT s FROM before), 'and the source');
SELECT is(pg_temp.owned('dest'), 0::bigint, 'no destination state at all');
-- XB3: a key the source never stored either is allowed, as locally
SELECT is(pg_temp.sp(pg_temp.import_sql('dest', pg_temp.wr('d'), '{}',
              (jsonb_set(pg_temp.export_doc('c-child')::jsonb,
                         '{checkpoint,files,1,blobKey}', to_jsonb(pg_temp.fk('gamma')))
               || jsonb_build_object('absentBlobKeys', jsonb_build_array(pg_temp.fk('gamma'))))::json)),
          'no error', 'XB3 a key the source holds no bytes for is not required');
SELECT is(sandbox_persist.checkpoint_get_head('dest'), 'fork-dest', 'XB3 imported');
SELECT is(pg_temp.sp(pg_temp.import_sql('dest', pg_temp.wr('d'))),
          'SP011 SANDBOX_SNAPSHOT_FORK_DESTINATION_NOT_EMPTY', 'XF9 a second import into it is SP011');
SELECT pg_temp.acquire('t', 'with-transcript');
SELECT sandbox_persist.message_save_thread('with-transcript', '[]');
SELECT is(pg_temp.sp(pg_temp.import_sql('with-transcript', pg_temp.wr('t'))),
          'SP011 SANDBOX_SNAPSHOT_FORK_DESTINATION_NOT_EMPTY', 'XF9 a destination with a saved transcript is SP011');

------------------------------------------------------------------------------
-- The move window and the move steps, moving 'src' out and back in.
------------------------------------------------------------------------------
SELECT sandbox_persist.run_create_or_resume('{"runId":"run-m1","threadId":"src","startedAt":100}');
SELECT sandbox_persist.run_update('run-m1', '{"status":"completed","finishedAt":200,"usage":{"t":1},"error":null}');
SELECT sandbox_persist.interrupt_create('{"interruptId":"int-m1","runId":"run-m1","threadId":"src","requestedAt":100,"payload":{"tool":"rm"}}');
SELECT sandbox_persist.interrupt_resolve('int-m1', 'null');
SELECT sandbox_persist.interrupt_create('{"interruptId":"int-m2","runId":"run-m1","threadId":"src","requestedAt":100,"payload":{}}');
SELECT sandbox_persist.generation_run_create_or_resume('{"runId":"gen-m1","threadId":"src","activity":"image","provider":"p","model":"m","startedAt":100}');
SELECT sandbox_persist.generation_run_update('gen-m1', '{"status":"completed","finishedAt":200,"result":null}');
SELECT sandbox_persist.artifact_save(json_build_object('artifactId', 'art-m1', 'runId', 'gen-m1',
    'threadId', 'src', 'name', 'y.png', 'mimeType', 'image/png', 'size', 3,
    'blobKey', pg_temp.ak('art'), 'createdAt', 150)::json);
SELECT sandbox_persist.event_log_append('run-m1', '[{"type":"a"},{"type":"b \u0000"}]',
    '{"producerId":"7d7b8a34-8d2f-4a53-9a53-8f2d4c1b2e11","producerSeq":1}');
-- (a log's logId is a per-shard row number, renumbered by an import)
CREATE FUNCTION pg_temp.reads_all() RETURNS text LANGUAGE sql AS $$
    SELECT pg_temp.reads('src')
           || regexp_replace(coalesce(sandbox_persist.event_log_read('run-m1', 0)::text, '')
                             || coalesce(sandbox_persist.event_log_snapshot('run-m1')::text, ''),
                             '"logId":[0-9]+', '"logId":N')
$$;
CREATE TEMP TABLE src_before AS
    SELECT pg_temp.reads_all() AS r;


SELECT is(left(pg_temp.sp($$SELECT sandbox_persist._thread_move_begin(repeat('x', 1025), 1)$$), 5), '22001',
          'XM1 a thread id over 1024 bytes is 22001');
SELECT is(left(pg_temp.sp($$SELECT sandbox_persist._thread_move_begin('src', -1)$$), 5), '22023',
          'XM1 a negative shard is 22023');
SELECT is(sandbox_persist._thread_move_begin('src', 1)::text, '{"state" : "moving"}', 'XM1 begin marks the thread');
SELECT is(sandbox_persist._thread_move_begin('src', 1)::text, '{"state" : "moving"}', 'XM1 begin is idempotent');
SELECT is(left(pg_temp.sp($$SELECT sandbox_persist._thread_move_begin('src', 2)$$), 5), '55000',
          'XM1 a move to another shard while moving is refused');
SELECT is(pg_temp.sp(format($$SELECT sandbox_persist.checkpoint_append(json_build_object(
    'checkpoint', json_build_object('id', 'c-3', 'threadId', 'src', 'parentCheckpointId', 'c-child',
        'createdAt', 3, 'reason', 'named', 'files', '[]'::json, 'artifacts', '[]'::json),
    'expectedHeadId', 'c-child', 'writer', %L::json), '[]')$$, pg_temp.wr('src'))),
          'SP014 SANDBOX_THREAD_MOVING', 'XM2 append to a moving thread is SP014');
SELECT is(pg_temp.sp($$SELECT sandbox_persist.message_save_thread('src', '[]')$$),
          'SP014 SANDBOX_THREAD_MOVING', 'XM2 message save is SP014');
SELECT is(pg_temp.sp($$SELECT sandbox_persist.checkpoint_renew_writer((SELECT writer FROM w WHERE name = 'src'))$$),
          'SP014 SANDBOX_THREAD_MOVING', 'XM2 lease renew is SP014');
SELECT is(pg_temp.sp($$SELECT sandbox_persist.run_update('run-m1', '{"status":"failed"}')$$),
          'SP014 SANDBOX_THREAD_MOVING', 'XM2 run update (by run id) is SP014');
SELECT is(pg_temp.sp($$SELECT sandbox_persist.artifact_delete('art-m1')$$),
          'SP014 SANDBOX_THREAD_MOVING', 'XM2 artifact delete is SP014');
SELECT is(pg_temp.sp($$SELECT sandbox_persist.interrupt_cancel('int-m2')$$),
          'SP014 SANDBOX_THREAD_MOVING', 'XM2 interrupt cancel is SP014');
SELECT is(pg_temp.sp($$SELECT sandbox_persist.event_log_append('run-m1', '[{"type":"c"}]')$$),
          'SP014 SANDBOX_THREAD_MOVING', 'XM2 an event log append for a run of the thread is SP014');
SELECT is(pg_temp.reads_all(), (SELECT r FROM src_before), 'XM2 reads work and nothing changed');
SELECT is(pg_temp.sp($$SELECT sandbox_persist.message_save_thread('other-thread', '[]')$$),
          'no error', 'XM2 other threads are writable');
SELECT is(sandbox_persist._thread_move_abort('src'), true, 'XM3 abort unmarks');
SELECT is(pg_temp.sp($$SELECT sandbox_persist.message_save_thread('src', '[{"role":"user","content":"latest"}]')$$),
          'no error', 'XM3 after an abort the thread is writable again');
SELECT is(left(pg_temp.sp($$SELECT sandbox_persist._thread_export('src')$$), 5), '55000',
          'XM4 export of a thread not marked as moving is refused');

SELECT sandbox_persist._thread_move_begin('src', 1);
CREATE TEMP TABLE doc AS SELECT sandbox_persist._thread_export('src') AS d;
SELECT is((SELECT json_array_length(d->'checkpoints') FROM doc), 2, 'XM4 export carries both checkpoints');
SELECT is(left(pg_temp.sp($$SELECT sandbox_persist._thread_import('src', 0, (SELECT d FROM doc))$$), 5), '55000',
          'XM5 import where the thread lives (and is moving out) is refused');
-- T22: the digests of the moved logs, to compare after the import
CREATE TEMP TABLE t22_digests ON COMMIT DROP AS
    SELECT l.run_id, l.tail_digest, array_agg(e.digest ORDER BY e.seq) AS digests
      FROM sandbox_persist.event_logs l JOIN sandbox_persist.event_log_entries e USING (log_id)
     GROUP BY l.run_id, l.tail_digest;
SELECT is(sandbox_persist._thread_drop('src')::text, '{"dropped" : true}', 'XM6 drop');
SELECT is(pg_temp.owned('src'), 0::bigint, 'XM6 the source copy is gone');
SELECT is((SELECT count(*) FROM sandbox_persist.conversation_blocks WHERE thread_id = 'src'), 0::bigint,
          'XM6 with its conversation');
SELECT is((SELECT count(*) FROM sandbox_persist.event_logs WHERE run_id = 'run-m1')
          + (SELECT count(*) FROM sandbox_persist.event_log_entries), 0::bigint,
          'XM6 and the event logs of its runs');
SELECT is(sandbox_persist._thread_drop('src')::text, '{"dropped" : false}', 'XM6 drop is idempotent');
SELECT is(sandbox_persist._thread_move_begin('src', 1)::text, '{"state" : "moved"}',
          'XM6 a resumed begin reports the move as done');
SELECT is(pg_temp.sp($$SELECT sandbox_persist.message_save_thread('src', '[]')$$),
          'SP014 SANDBOX_THREAD_MOVING', 'XM7 the tombstone refuses a stale write');
SELECT is(pg_temp.sp($$SELECT sandbox_persist.checkpoint_acquire_writer('src')$$),
          'SP014 SANDBOX_THREAD_MOVING', 'XM7 and a stale acquire');

-- XM8: back in (this database plays the destination now)
SELECT sandbox_persist.blob_delete(pg_temp.fk('beta'));
SELECT is(pg_temp.sp($$SELECT sandbox_persist._thread_import('src', 1, (SELECT d FROM doc))$$),
          'SP015 SANDBOX_SNAPSHOT_FORK_BLOB_MISSING', 'XM8 import without a referenced blob is SP015');
SELECT is(pg_temp.owned('src'), 0::bigint, 'XM8 and imports nothing');
SELECT sandbox_persist.blob_put(pg_temp.fk('beta'), convert_to('beta', 'UTF8'));
-- XM11: a document a 0.4.0 shard exported names a message per log position;
-- it imports into the same blocks (tried in a savepoint, then undone)
CREATE TEMP TABLE doc_040 AS
SELECT json_object_agg(k.key, k.value) AS d FROM doc, LATERAL (
    SELECT key, value FROM json_each(doc.d) WHERE key <> 'conversationBlocks'
    UNION ALL
    SELECT 'conversationMessages', coalesce(json_agg(json_build_object(
               'messageId', (blk.v->>0)::bigint + e.k - 1, 'hash', '', 'body', e.m::text)), '[]')
      FROM json_array_elements(doc.d->'conversationBlocks') AS blk(v),
           json_array_elements(('[' || (blk.v->>2) || ']')::json) WITH ORDINALITY AS e(m, k)
    UNION ALL
    SELECT 'conversationLog', coalesce(json_agg(json_build_array(p, p)), '[]')
      FROM json_array_elements(doc.d->'conversationBlocks') AS blk(v),
           generate_series((blk.v->>0)::bigint, (blk.v->>0)::bigint + (blk.v->>1)::bigint - 1) AS p) k;
SELECT ok((SELECT json_array_length(d->'conversationBlocks') > 0 FROM doc)
          AND (SELECT d->'conversationBlocks' IS NULL AND json_array_length(d->'conversationLog') > 0 FROM doc_040),
          'XM11 the move carries conversation blocks; the 0.4.0 form carries positions instead');
SAVEPOINT xm11;
SELECT sandbox_persist._thread_import('src', 1, (SELECT d FROM doc_040))::text
       = '{"imported" : true, "alreadyImported" : false}' AS xm11_imported \gset
SELECT pg_temp.reads_all() = (SELECT r FROM src_before) AS xm11_reads,
       (SELECT jsonb_agg(jsonb_build_array(first_pos, message_count, bodies) ORDER BY first_pos)
          FROM sandbox_persist.conversation_blocks WHERE thread_id = 'src')
         = (SELECT (d->'conversationBlocks')::jsonb FROM doc) AS xm11_blocks \gset
ROLLBACK TO SAVEPOINT xm11;
SELECT ok(:'xm11_imported' AND :'xm11_reads', 'XM11 a 0.4.0 export imports, and every read is as before the move');
SELECT ok(:'xm11_blocks', 'XM11 into the blocks the 0.5.0 export names');
SELECT is(sandbox_persist._thread_import('src', 1, (SELECT d FROM doc))::text,
          '{"imported" : true, "alreadyImported" : false}', 'XM8 import');
SELECT is(pg_temp.reads_all(), (SELECT r FROM src_before), 'XM8 every read is as before the move');
SELECT ok((SELECT count(*) FROM t22_digests) > 0, 'T22.1 the moved thread had event log entries');
SELECT is((SELECT array_agg(format('%s %s %s', run_id, tail_digest, digests) ORDER BY run_id) FROM t22_digests),
          (SELECT array_agg(format('%s %s %s', l.run_id, l.tail_digest,
                  (SELECT array_agg(e.digest ORDER BY e.seq) FROM sandbox_persist.event_log_entries e
                    WHERE e.log_id = l.log_id)) ORDER BY l.run_id)
             FROM sandbox_persist.event_logs l WHERE l.run_id IN (SELECT run_id FROM t22_digests)),
          'T22.2 the imported logs carry the source''s digests and tail digests, so readers'' tokens stay valid');
SELECT is(sandbox_persist._thread_import('src', 1, (SELECT d FROM doc))::text,
          '{"imported" : false, "alreadyImported" : true}', 'XM8 a repeated import changes nothing');
SELECT is(pg_temp.reads_all(), (SELECT r FROM src_before), 'XM8 still as before');
SELECT is(left(pg_temp.sp($$SELECT sandbox_persist._thread_move_begin('src', 3)$$), 5), '55000',
          'XM8 no move out before the move in finished');
SELECT is(sandbox_persist._thread_move_finish('src'), true, 'XM8 finish');
SELECT is(pg_temp.sp(format($$SELECT sandbox_persist.checkpoint_append(json_build_object(
    'checkpoint', json_build_object('id', 'c-3', 'threadId', 'src', 'parentCheckpointId', 'c-child',
        'createdAt', 3, 'reason', 'named', 'files', '[]'::json, 'artifacts', '[]'::json),
    'expectedHeadId', 'c-child', 'writer', %L::json), '[]')$$, pg_temp.wr('src'))),
          'no error', 'XM9 the moved lease keeps working after the move');
SELECT is(left(pg_temp.sp($$SELECT sandbox_persist._thread_import('src', 1, (SELECT d FROM doc))$$), 5), '55000',
          'XM9 an import over existing state is refused');

-- XM10: the write guard locks buckets, not threads: one transaction writing
-- rows of 5 000 threads holds at most 256 guard locks (one per thread would
-- exhaust the lock table of a default server at about 6 400).
CREATE TEMP TABLE xm10_before ON COMMIT DROP AS
    SELECT count(*)::int AS n FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid();
SELECT lives_ok($$INSERT INTO sandbox_persist.runs (run_id, thread_id, status, started_at, changed_at)
                  SELECT 'xm10-run-' || i, 'xm10-thread-' || i, 'running', 1767225600000, 1767225600000
                    FROM generate_series(1, 5000) i$$,
    'XM10 a transaction writes runs of 5 000 threads');
SELECT cmp_ok((SELECT count(*)::int FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid())
              - (SELECT n FROM xm10_before), '<=', 256,
    'XM10.1 and takes at most 256 more advisory locks (the write guard''s buckets)');

SELECT * FROM finish();
ROLLBACK;
