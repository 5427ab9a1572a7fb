-- pgTAP: checkpoint fork (docs/contract/checkpoint-store.md §7,
-- docs/contract/README.md §4).
-- Cases: F1-F10, R24 (transcript, run and checkpoint parts), R25 (instance
-- row and lease row parts), R26, R31, S3, S19.
-- Not covered here: R24's generation run, interrupt and artifact-record parts
-- and R25's metadata and blob parts (those stores do not exist yet).
-- Run with: pg_prove -d <db> test/pgtap/fork.sql (needs allow_test_reset;
-- S3 and S19 need a superuser).
BEGIN;
SELECT plan(83);
SELECT sandbox_persist._reset_for_tests();

------------------------------------------------------------------------------
-- Helpers (temporary, gone at ROLLBACK).
------------------------------------------------------------------------------

-- Writers (whole acquire results, passed back unchanged as upstream does).
CREATE TEMP TABLE w (name text PRIMARY KEY, writer json NOT NULL);

-- 'SQLSTATE CODE_NAME' of the error a statement raises ('no error' if none).
-- The code name is the one error_codes() gives the SQLSTATE (errdetail must not start with it).
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

-- The message of the error a statement raises (NULL if none).
CREATE FUNCTION pg_temp.errmsg(sql text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    msg text;
BEGIN
    EXECUTE sql;
    RETURN NULL;
EXCEPTION WHEN OTHERS THEN
    GET STACKED DIAGNOSTICS msg = MESSAGE_TEXT;
    RETURN msg;
END
$$;

-- Content-addressed keys made of one repeated hex digit.
CREATE FUNCTION pg_temp.k(c text) RETURNS text LANGUAGE sql AS $$
    SELECT 'sandbox-files/sha256/' || repeat(c, 64)
$$;
CREATE FUNCTION pg_temp.ak(c text) RETURNS text LANGUAGE sql AS $$
    SELECT 'sandbox-artifacts/sha256/' || repeat(c, 64)
$$;

-- Empty store, no writers: every case starts from here.
CREATE FUNCTION pg_temp.reset() RETURNS void LANGUAGE sql AS $$
    SELECT sandbox_persist._reset_for_tests();
    DELETE FROM w;
$$;

CREATE FUNCTION pg_temp.acquire(name text, thread text) RETURNS json LANGUAGE sql AS $$
    INSERT INTO w VALUES (name, sandbox_persist.checkpoint_acquire_writer(thread))
    ON CONFLICT (name) DO UPDATE SET writer = EXCLUDED.writer
    RETURNING writer
$$;

CREATE FUNCTION pg_temp.wr(name text) RETURNS json LANGUAGE sql AS $$
    SELECT writer FROM w WHERE w.name = wr.name
$$;

CREATE FUNCTION pg_temp.append(writer text, checkpoint json, expected text,
                               conversation json) RETURNS json LANGUAGE sql AS $$
    SELECT sandbox_persist.checkpoint_append(
        json_build_object('checkpoint', checkpoint, 'expectedHeadId', expected,
                          'writer', pg_temp.wr(writer)),
        conversation)
$$;

-- The upstream fork suite's source checkpoint (without its conversation).
CREATE FUNCTION pg_temp.source_checkpoint() RETURNS json LANGUAGE sql AS $$
    SELECT json_build_object(
        'id', 'source-root', 'threadId', 'source', 'parentCheckpointId', NULL,
        'createdAt', 10, 'reason', 'named', 'label', 'source label', 'sourceRunId', 'run-1',
        'files', json_build_array(json_build_object(
            'path', 'a.txt', 'kind', 'file', 'blobKey', pg_temp.k('a'), 'size', 1)),
        'artifacts', '[]'::json)
$$;
CREATE FUNCTION pg_temp.source_conversation() RETURNS json LANGUAGE sql AS $$
    SELECT '[{"role":"user","content":"checkpoint conversation"}]'::json
$$;

-- appendSource: acquire 'source' (kept as writer 'source'), append source-root.
CREATE FUNCTION pg_temp.append_source() RETURNS json LANGUAGE sql AS $$
    SELECT pg_temp.acquire('source', 'source');
    SELECT pg_temp.append('source', pg_temp.source_checkpoint(), NULL,
                          pg_temp.source_conversation());
$$;

-- The default fork input (source-root of source into destination/fork-root
-- at createdAt 20) with overrides.
CREATE FUNCTION pg_temp.fork_input(writer json, overrides jsonb DEFAULT '{}') RETURNS json
LANGUAGE sql AS $$
    SELECT (jsonb_build_object(
        'sourceThreadId', 'source', 'sourceCheckpointId', 'source-root',
        'destinationThreadId', 'destination', 'destinationCheckpointId', 'fork-root',
        'createdAt', 20, 'writer', writer) || overrides)::json
$$;
CREATE FUNCTION pg_temp.fork_sql(writer json, overrides jsonb DEFAULT '{}') RETURNS text
LANGUAGE sql AS $$
    SELECT format('SELECT sandbox_persist.checkpoint_fork_from_checkpoint(%L::json)',
                  pg_temp.fork_input(writer, overrides))
$$;

-- A thread's state as the fork suite compares it (transcript, head, list,
-- global references), plus the raw transcript row, which tells "no row"
-- apart from a saved [].
CREATE FUNCTION pg_temp.thread_state(t text) RETURNS text LANGUAGE sql AS $$
    SELECT json_build_object(
        'transcriptRow', (SELECT transcript::text FROM sandbox_persist.messages
                           WHERE thread_id = t),
        'transcript', sandbox_persist.message_load_thread(t),
        'head', sandbox_persist.checkpoint_get_head(t),
        'checkpoints', sandbox_persist.checkpoint_list(t),
        'references', sandbox_persist.checkpoint_list_blob_references())::text
$$;

CREATE FUNCTION pg_temp.has_transcript_row(t text) RETURNS boolean LANGUAGE sql AS $$
    SELECT EXISTS (SELECT 1 FROM sandbox_persist.messages WHERE thread_id = t)
$$;

CREATE TEMP TABLE saved (name text PRIMARY KEY, value text);
CREATE FUNCTION pg_temp.save(name text, value text) RETURNS void LANGUAGE sql AS $$
    INSERT INTO saved VALUES (name, value)
    ON CONFLICT (name) DO UPDATE SET value = EXCLUDED.value
$$;
CREATE FUNCTION pg_temp.saved(name text) RETURNS text LANGUAGE sql AS $$
    SELECT value FROM saved s WHERE s.name = saved.name
$$;

------------------------------------------------------------------------------
-- F1: fork of a historical checkpoint, exact fork root.
------------------------------------------------------------------------------
SELECT pg_temp.reset();
SELECT pg_temp.append_source();
SELECT pg_temp.append('source', json_build_object(
    'id', 'source-head', 'threadId', 'source', 'parentCheckpointId', 'source-root',
    'createdAt', 11, 'reason', 'automatic', 'files', '[]'::json, 'artifacts', '[]'::json),
    'source-root', '[{"role":"user","content":"newer conversation"}]');
SELECT sandbox_persist.message_save_thread('source',
    '[{"role":"user","content":"current source message"}]');
SELECT pg_temp.acquire('destination', 'destination');
SELECT pg_temp.save('F1 source list', sandbox_persist.checkpoint_list('source')::text);
SELECT pg_temp.save('F1 source lease', (SELECT row(fence, owner_token, lease_expires_at)::text
    FROM sandbox_persist.checkpoint_threads WHERE thread_id = 'source'));
SELECT pg_temp.save('F1 result', sandbox_persist.checkpoint_fork_from_checkpoint(
    pg_temp.fork_input(pg_temp.wr('destination')))::text);

SELECT is(pg_temp.saved('F1 result')::jsonb,
    jsonb_build_object('checkpoint', jsonb_build_object(
        'id', 'fork-root', 'threadId', 'destination', 'parentCheckpointId', NULL,
        'createdAt', 20, 'reason', 'fork-root',
        'files', pg_temp.source_checkpoint()->'files',
        'conversation', pg_temp.source_conversation(),
        'artifacts', '[]'::jsonb)),
    'F1.1 the fork returns exactly {checkpoint: fork-root of destination, parent null, createdAt 20, reason fork-root, the source''s files, conversation and artifacts}');
SELECT ok(NOT (pg_temp.saved('F1 result')::jsonb->'checkpoint') ?| ARRAY['label', 'sourceRunId'],
    'F1.2 the fork root has no label and no sourceRunId although the source has both');
SELECT ok((pg_temp.saved('F1 result')::jsonb->'checkpoint') ? 'parentCheckpointId',
    'F1.3 parentCheckpointId is present (null) on the fork root');
SELECT is(sandbox_persist.message_load_thread('destination')::jsonb,
    pg_temp.source_conversation()::jsonb,
    'F1.4 the destination transcript equals the checkpoint''s conversation, not the source''s current transcript');
SELECT is(sandbox_persist.checkpoint_get_head('source'), 'source-head',
    'F1.5 the source head is unchanged');
SELECT is(sandbox_persist.checkpoint_get_head('destination'), 'fork-root',
    'F1.6 the destination head is the fork root');
SELECT is(sandbox_persist.checkpoint_list('destination')::jsonb,
    jsonb_build_array(pg_temp.saved('F1 result')::jsonb->'checkpoint'),
    'F1.7 the destination lists exactly the fork root');
SELECT is(sandbox_persist.checkpoint_get('fork-root')::jsonb,
    pg_temp.saved('F1 result')::jsonb->'checkpoint',
    'F1.8 get(fork-root) returns the same record the fork returned');
SELECT is(sandbox_persist.message_load_thread('source')::jsonb,
    '[{"role":"user","content":"current source message"}]'::jsonb,
    'F1.9 the source transcript is unchanged');
SELECT is(sandbox_persist.checkpoint_list('source')::text, pg_temp.saved('F1 source list'),
    'F1.10 the source''s checkpoints are unchanged');
SELECT is((SELECT row(fence, owner_token, lease_expires_at)::text
             FROM sandbox_persist.checkpoint_threads WHERE thread_id = 'source'),
    pg_temp.saved('F1 source lease'),
    'F1.11 the source lease is untouched');
SELECT is(sandbox_persist.checkpoint_list_blob_references()::jsonb,
    jsonb_build_array(jsonb_build_object('key', pg_temp.k('a'), 'references', 2)),
    'F1.12 the fork adds one reference to the source''s key');

------------------------------------------------------------------------------
-- F2: fork is a capability of this store.
------------------------------------------------------------------------------
SELECT has_function('sandbox_persist', 'checkpoint_fork_from_checkpoint',
    ARRAY['json', 'bigint'],
    'F2 checkpoint_fork_from_checkpoint(json, bigint) exists');

------------------------------------------------------------------------------
-- F3: missing source checkpoint.
------------------------------------------------------------------------------
SELECT pg_temp.reset();
SELECT pg_temp.acquire('destination', 'destination');
SELECT pg_temp.save('before', pg_temp.thread_state('destination'));
SELECT is(pg_temp.sp(pg_temp.fork_sql(pg_temp.wr('destination'),
                                      '{"sourceCheckpointId": "missing"}')),
    'SP009 SANDBOX_SNAPSHOT_FORK_SOURCE_NOT_FOUND',
    'F3.1 a missing source checkpoint -> SP009 FORK_SOURCE_NOT_FOUND');
SELECT is(pg_temp.thread_state('destination'), pg_temp.saved('before'),
    'F3.2 destination transcript, head, list and references unchanged');
SELECT is(pg_temp.sp(pg_temp.fork_sql(
        '{"threadId": "destination", "ownerToken": "missing-owner", "fence": 1}',
        '{"sourceCheckpointId": "missing"}')),
    'SP009 SANDBOX_SNAPSHOT_FORK_SOURCE_NOT_FOUND',
    'F3.3 a missing source with a writer that is not current is still SP009 (source checked before the writer)');

------------------------------------------------------------------------------
-- F4: source thread does not own the checkpoint.
------------------------------------------------------------------------------
SELECT pg_temp.reset();
SELECT pg_temp.append_source();
SELECT pg_temp.acquire('destination', 'destination');
SELECT pg_temp.save('before', pg_temp.thread_state('destination'));
SELECT is(pg_temp.sp(pg_temp.fork_sql(pg_temp.wr('destination'),
                                      '{"sourceThreadId": "another-source"}')),
    'SP010 SANDBOX_SNAPSHOT_FORK_SOURCE_THREAD_MISMATCH',
    'F4.1 a sourceThreadId that does not own the checkpoint -> SP010 FORK_SOURCE_THREAD_MISMATCH');
SELECT is(pg_temp.thread_state('destination'), pg_temp.saved('before'),
    'F4.2 destination transcript, head, list and references unchanged');
SELECT is(pg_temp.sp(pg_temp.fork_sql(
        '{"threadId": "destination", "ownerToken": "missing-owner", "fence": 1}',
        '{"sourceThreadId": "another-source"}')),
    'SP010 SANDBOX_SNAPSHOT_FORK_SOURCE_THREAD_MISMATCH',
    'F4.3 the thread mismatch with a writer that is not current is still SP010 (source checked before the writer)');

------------------------------------------------------------------------------
-- F5: destination equal to the source thread, with the source lease.
------------------------------------------------------------------------------
SELECT pg_temp.reset();
SELECT pg_temp.append_source();
SELECT pg_temp.save('before', pg_temp.thread_state('source'));
SELECT is(pg_temp.sp(pg_temp.fork_sql(pg_temp.wr('source'),
                                      '{"destinationThreadId": "source"}')),
    'SP010 SANDBOX_SNAPSHOT_FORK_SOURCE_THREAD_MISMATCH',
    'F5.1 destination = source thread with the source lease -> SP010 (not NOT_EMPTY)');
SELECT is(pg_temp.thread_state('source'), pg_temp.saved('before'),
    'F5.2 source transcript, head, list and references unchanged');

------------------------------------------------------------------------------
-- F6: fabricated writer for a thread that never had a lease.
------------------------------------------------------------------------------
SELECT pg_temp.reset();
SELECT pg_temp.append_source();
SELECT pg_temp.save('before', pg_temp.thread_state('destination'));
SELECT is(pg_temp.sp(pg_temp.fork_sql(
        '{"threadId": "destination", "ownerToken": "missing-owner", "fence": 1}')),
    'SP006 SANDBOX_SNAPSHOT_WRITER_LOST',
    'F6.1 a fabricated destination writer -> SP006 WRITER_LOST');
SELECT is(pg_temp.thread_state('destination'), pg_temp.saved('before'),
    'F6.2 destination transcript, head, list and references unchanged');

------------------------------------------------------------------------------
-- F7: the lease of another thread.
------------------------------------------------------------------------------
SELECT pg_temp.reset();
SELECT pg_temp.append_source();
SELECT pg_temp.acquire('other', 'another-thread');
SELECT pg_temp.save('before', pg_temp.thread_state('destination'));
SELECT is(pg_temp.sp(pg_temp.fork_sql(pg_temp.wr('other'))),
    'SP006 SANDBOX_SNAPSHOT_WRITER_LOST',
    'F7.1 the lease of another thread -> SP006 WRITER_LOST');
SELECT is(pg_temp.thread_state('destination'), pg_temp.saved('before'),
    'F7.2 destination transcript, head, list and references unchanged');
-- The same while the destination has a live lease of its own.
SELECT pg_temp.acquire('destination', 'destination');
SELECT pg_temp.save('before', pg_temp.thread_state('destination'));
SELECT is(pg_temp.sp(pg_temp.fork_sql(pg_temp.wr('other'))),
    'SP006 SANDBOX_SNAPSHOT_WRITER_LOST',
    'F7.3 the lease of another thread -> SP006 even while the destination is leased');
SELECT is(pg_temp.thread_state('destination'), pg_temp.saved('before'),
    'F7.4 destination transcript, head, list and references unchanged');

------------------------------------------------------------------------------
-- F8: a released destination lease.
------------------------------------------------------------------------------
SELECT pg_temp.reset();
SELECT pg_temp.append_source();
SELECT pg_temp.acquire('destination', 'destination');
SELECT ok(sandbox_persist.checkpoint_release_writer(pg_temp.wr('destination')),
    'F8.1 the destination lease is released');
SELECT pg_temp.save('before', pg_temp.thread_state('destination'));
SELECT is(pg_temp.sp(pg_temp.fork_sql(pg_temp.wr('destination'))),
    'SP006 SANDBOX_SNAPSHOT_WRITER_LOST',
    'F8.2 a released destination lease -> SP006 WRITER_LOST');
SELECT is(pg_temp.thread_state('destination'), pg_temp.saved('before'),
    'F8.3 destination transcript, head, list and references unchanged');

------------------------------------------------------------------------------
-- F9: destination with a saved transcript.
------------------------------------------------------------------------------
SELECT pg_temp.reset();
SELECT pg_temp.append_source();
SELECT sandbox_persist.message_save_thread('destination',
    '[{"role":"user","content":"already here"}]');
SELECT pg_temp.acquire('destination', 'destination');
SELECT pg_temp.save('before', pg_temp.thread_state('destination'));
SELECT is(pg_temp.sp(pg_temp.fork_sql(pg_temp.wr('destination'))),
    'SP011 SANDBOX_SNAPSHOT_FORK_DESTINATION_NOT_EMPTY',
    'F9.1 a destination with a saved transcript -> SP011 FORK_DESTINATION_NOT_EMPTY');
SELECT is(pg_temp.thread_state('destination'), pg_temp.saved('before'),
    'F9.2 destination transcript, head, list and references unchanged');
SELECT is(sandbox_persist.message_load_thread('destination')::jsonb,
    '[{"role":"user","content":"already here"}]'::jsonb,
    'F9.3 the destination transcript is still its own');
SELECT sandbox_persist.checkpoint_release_writer(pg_temp.wr('destination'));
SELECT is(pg_temp.sp(pg_temp.fork_sql(pg_temp.wr('destination'))),
    'SP006 SANDBOX_SNAPSHOT_WRITER_LOST',
    'F9.4 the same fork with the destination lease released is SP006 (writer checked before emptiness)');
SELECT is(pg_temp.thread_state('destination'), pg_temp.saved('before'),
    'F9.5 destination transcript, head, list and references unchanged');

------------------------------------------------------------------------------
-- F10: destination checkpoint id already used in another thread.
------------------------------------------------------------------------------
SELECT pg_temp.reset();
SELECT pg_temp.append_source();
SELECT pg_temp.acquire('orphan', 'orphan-thread');
SELECT pg_temp.append('orphan',
    (pg_temp.source_checkpoint()::jsonb
     || '{"id": "orphaned-id", "threadId": "orphan-thread", "parentCheckpointId": null, "createdAt": 11}')::json,
    NULL, pg_temp.source_conversation());
SELECT pg_temp.acquire('destination', 'destination');
SELECT pg_temp.save('before', pg_temp.thread_state('destination'));
SELECT is(pg_temp.sp(pg_temp.fork_sql(pg_temp.wr('destination'),
                                      '{"destinationCheckpointId": "orphaned-id"}')),
    'SP011 SANDBOX_SNAPSHOT_FORK_DESTINATION_NOT_EMPTY',
    'F10.1 a destination checkpoint id used in another thread -> SP011 (not DUPLICATE_ID)');
SELECT is(pg_temp.thread_state('destination'), pg_temp.saved('before'),
    'F10.2 destination transcript, head, list and references unchanged');
SELECT is(sandbox_persist.checkpoint_get('orphaned-id')->>'threadId', 'orphan-thread',
    'F10.3 the existing checkpoint still belongs to its thread');

------------------------------------------------------------------------------
-- R24: destination-owned state blocks a fork and leaves no head.
-- (Generation runs, interrupts and artifact records: stores not implemented.)
------------------------------------------------------------------------------
-- A saved empty transcript.
SELECT pg_temp.reset();
SELECT pg_temp.append_source();
SELECT sandbox_persist.message_save_thread('destination', '[]');
SELECT pg_temp.acquire('destination', 'destination');
SELECT pg_temp.save('before', pg_temp.thread_state('destination'));
SELECT is(pg_temp.sp(pg_temp.fork_sql(pg_temp.wr('destination'))),
    'SP011 SANDBOX_SNAPSHOT_FORK_DESTINATION_NOT_EMPTY',
    'R24.1 a saved empty transcript [] blocks the fork -> SP011');
SELECT is(sandbox_persist.checkpoint_get_head('destination'), NULL,
    'R24.2 the destination has no head after the refused fork');
SELECT is(pg_temp.thread_state('destination'), pg_temp.saved('before'),
    'R24.3 destination transcript ([] row kept), list and references unchanged');

-- A run of the destination thread.
SELECT pg_temp.reset();
SELECT pg_temp.append_source();
SELECT sandbox_persist.run_create_or_resume(
    '{"runId": "run-d", "threadId": "destination", "startedAt": 1000}');
SELECT pg_temp.acquire('destination', 'destination');
SELECT pg_temp.save('before', pg_temp.thread_state('destination'));
SELECT is(pg_temp.sp(pg_temp.fork_sql(pg_temp.wr('destination'))),
    'SP011 SANDBOX_SNAPSHOT_FORK_DESTINATION_NOT_EMPTY',
    'R24.4 a run of the destination thread blocks the fork -> SP011');
SELECT is(sandbox_persist.checkpoint_get_head('destination'), NULL,
    'R24.5 the destination has no head after the refused fork');
SELECT is(pg_temp.thread_state('destination'), pg_temp.saved('before'),
    'R24.6 destination transcript (no row), list and references unchanged');
SELECT is(sandbox_persist.run_get('run-d')->>'threadId', 'destination',
    'R24.7 the run is still there');

-- A checkpoint (and head) of the destination itself.
SELECT pg_temp.reset();
SELECT pg_temp.append_source();
SELECT pg_temp.acquire('destination', 'destination');
SELECT pg_temp.append('destination',
    (pg_temp.source_checkpoint()::jsonb
     || '{"id": "dest-root", "threadId": "destination", "label": null, "sourceRunId": null}')::json,
    NULL, '[]');
SELECT pg_temp.save('before', pg_temp.thread_state('destination'));
SELECT is(pg_temp.sp(pg_temp.fork_sql(pg_temp.wr('destination'))),
    'SP011 SANDBOX_SNAPSHOT_FORK_DESTINATION_NOT_EMPTY',
    'R24.8 a destination with its own checkpoint and head blocks the fork -> SP011');
SELECT is(pg_temp.thread_state('destination'), pg_temp.saved('before'),
    'R24.9 destination transcript, head, list and references unchanged');

------------------------------------------------------------------------------
-- R25: state that does not block a fork: an instance row, the lease row.
-- (Metadata entries and blobs: stores not implemented.)
------------------------------------------------------------------------------
SELECT pg_temp.reset();
SELECT pg_temp.append_source();
SELECT sandbox_persist.instance_upsert(
    '{"key": "inst-d", "provider": "local", "providerSandboxId": "sbx-1", "threadId": "destination", "updatedAt": 1000}');
SELECT pg_temp.acquire('destination', 'destination');
SELECT is(pg_temp.sp(pg_temp.fork_sql(pg_temp.wr('destination'))), 'no error',
    'R25.1 a destination with only a sandbox instance row can be forked into');
SELECT is(sandbox_persist.checkpoint_get_head('destination'), 'fork-root',
    'R25.2 the fork root is the destination head');
SELECT is(sandbox_persist.instance_get('inst-d')->>'threadId', 'destination',
    'R25.3 the instance row is untouched');

-- The destination's own lease row, with history (acquired, released, re-acquired).
SELECT pg_temp.reset();
SELECT pg_temp.append_source();
SELECT pg_temp.acquire('destination', 'destination');
SELECT sandbox_persist.checkpoint_release_writer(pg_temp.wr('destination'));
SELECT pg_temp.acquire('destination', 'destination');
SELECT is((pg_temp.wr('destination')->>'fence')::int, 2,
    'R25.4 the destination lease row exists with fence 2');
SELECT is(pg_temp.sp(pg_temp.fork_sql(pg_temp.wr('destination'))), 'no error',
    'R25.5 a destination whose only row is its own lease row can be forked into');
SELECT is(sandbox_persist.checkpoint_get_head('destination'), 'fork-root',
    'R25.6 the fork root is the destination head');
SELECT is(sandbox_persist.message_load_thread('destination')::jsonb,
    pg_temp.source_conversation()::jsonb,
    'R25.7 the destination transcript is the checkpoint conversation');
SELECT is((SELECT fence FROM sandbox_persist.checkpoint_threads WHERE thread_id = 'destination'),
    2::bigint, 'R25.8 the fork leaves the destination fence alone');

------------------------------------------------------------------------------
-- R26: destinationCheckpointId equal to the source checkpoint id.
------------------------------------------------------------------------------
SELECT pg_temp.reset();
SELECT pg_temp.append_source();
SELECT pg_temp.acquire('destination', 'destination');
SELECT pg_temp.save('before', pg_temp.thread_state('destination'));
SELECT is(pg_temp.sp(pg_temp.fork_sql(pg_temp.wr('destination'),
                                      '{"destinationCheckpointId": "source-root"}')),
    'SP011 SANDBOX_SNAPSHOT_FORK_DESTINATION_NOT_EMPTY',
    'R26.1 destinationCheckpointId = the source checkpoint id -> SP011');
SELECT ok(NOT pg_temp.has_transcript_row('destination'),
    'R26.2 the destination has no transcript row');
SELECT is(sandbox_persist.message_load_thread('destination')::text, '[]',
    'R26.3 the destination transcript loads as []');
SELECT is(sandbox_persist.checkpoint_list('destination')::text, '[]',
    'R26.4 the destination list is empty');
SELECT is(sandbox_persist.checkpoint_get_head('destination'), NULL,
    'R26.5 the destination has no head');
SELECT is(pg_temp.thread_state('destination'), pg_temp.saved('before'),
    'R26.6 references unchanged');
SELECT is(sandbox_persist.checkpoint_get('source-root')->>'threadId', 'source',
    'R26.7 source-root still belongs to the source thread');

------------------------------------------------------------------------------
-- R31: +1 reference per distinct key of the source.
------------------------------------------------------------------------------
SELECT pg_temp.reset();
SELECT pg_temp.acquire('source', 'source');
SELECT pg_temp.append('source', json_build_object(
    'id', 'source-root', 'threadId', 'source', 'parentCheckpointId', NULL,
    'createdAt', 10, 'reason', 'named',
    'files', json_build_array(
        json_build_object('path', 'a.txt', 'kind', 'file', 'blobKey', pg_temp.k('b'), 'size', 3),
        json_build_object('path', 'docs', 'kind', 'dir'),
        json_build_object('path', 'docs/copy.txt', 'kind', 'file', 'blobKey', pg_temp.k('b'), 'size', 3)),
    'artifacts', json_build_array(json_build_object(
        'artifactId', 'art-1', 'name', 'report.txt', 'mimeType', 'text/plain',
        'size', 5, 'blobKey', pg_temp.ak('d'), 'createdAt', 12.5))),
    NULL, pg_temp.source_conversation());
SELECT pg_temp.acquire('destination', 'destination');
SELECT is(sandbox_persist.checkpoint_list_blob_references()::jsonb,
    jsonb_build_array(
        jsonb_build_object('key', pg_temp.ak('d'), 'references', 1),
        jsonb_build_object('key', pg_temp.k('b'), 'references', 1)),
    'R31.1 before the fork: two files sharing a key and an artifact key count 1 each');
SELECT pg_temp.save('R31 result', sandbox_persist.checkpoint_fork_from_checkpoint(
    pg_temp.fork_input(pg_temp.wr('destination')))::text);
SELECT is(sandbox_persist.checkpoint_list_blob_references()::jsonb,
    jsonb_build_array(
        jsonb_build_object('key', pg_temp.ak('d'), 'references', 2),
        jsonb_build_object('key', pg_temp.k('b'), 'references', 2)),
    'R31.2 the fork adds exactly one reference per distinct key (shared file key +1, artifact key +1)');
SELECT is(pg_temp.saved('R31 result')::jsonb->'checkpoint'->'files',
    sandbox_persist.checkpoint_get('source-root')::jsonb->'files',
    'R31.3 the fork root copies the files exactly (dir entry included)');
SELECT is(pg_temp.saved('R31 result')::jsonb->'checkpoint'->'artifacts',
    sandbox_persist.checkpoint_get('source-root')::jsonb->'artifacts',
    'R31.4 the fork root copies the artifacts exactly');
SELECT is(pg_temp.sp(format('SELECT sandbox_persist.checkpoint_delete_head(%L::json)',
        json_build_object('threadId', 'destination', 'checkpointId', 'fork-root',
                          'writer', pg_temp.wr('destination')))),
    'no error', 'R31.5 the fork root can be deleted again');
SELECT is(sandbox_persist.checkpoint_list_blob_references()::jsonb,
    jsonb_build_array(
        jsonb_build_object('key', pg_temp.ak('d'), 'references', 1),
        jsonb_build_object('key', pg_temp.k('b'), 'references', 1)),
    'R31.6 deleting the fork root takes back exactly the references the fork added');

------------------------------------------------------------------------------
-- S3: source reference rows removed (corruption) -> SP008.
------------------------------------------------------------------------------
SELECT pg_temp.reset();
SELECT pg_temp.append_source();
SELECT pg_temp.acquire('destination', 'destination');
DELETE FROM sandbox_persist.checkpoint_blob_refs WHERE checkpoint_id = 'source-root';
SELECT pg_temp.save('before', pg_temp.thread_state('destination'));
SELECT is(pg_temp.sp(pg_temp.fork_sql(pg_temp.wr('destination'))),
    'SP008 SANDBOX_SNAPSHOT_INVALID_ENTRY',
    'S3.1 a source without its reference rows -> SP008 INVALID_ENTRY');
SELECT is(pg_temp.thread_state('destination'), pg_temp.saved('before'),
    'S3.2 destination transcript, head, list and references unchanged');
SELECT ok(NOT pg_temp.has_transcript_row('destination'),
    'S3.3 no destination transcript row');
SELECT is(sandbox_persist.checkpoint_get_head('destination'), NULL,
    'S3.4 no destination head');

-- Only one of two distinct keys lacks its row.
SELECT pg_temp.reset();
SELECT pg_temp.acquire('source', 'source');
SELECT pg_temp.append('source',
    (pg_temp.source_checkpoint()::jsonb || jsonb_build_object('files', jsonb_build_array(
        jsonb_build_object('path', 'a.txt', 'kind', 'file', 'blobKey', pg_temp.k('a'), 'size', 1),
        jsonb_build_object('path', 'b.txt', 'kind', 'file', 'blobKey', pg_temp.k('b'), 'size', 1))))::json,
    NULL, pg_temp.source_conversation());
SELECT pg_temp.acquire('destination', 'destination');
DELETE FROM sandbox_persist.checkpoint_blob_refs
    WHERE checkpoint_id = 'source-root' AND blob_key = pg_temp.k('b');
SELECT pg_temp.save('before', pg_temp.thread_state('destination'));
SELECT is(pg_temp.sp(pg_temp.fork_sql(pg_temp.wr('destination'))),
    'SP008 SANDBOX_SNAPSHOT_INVALID_ENTRY',
    'S3.5 a source missing the reference row of one of its two keys -> SP008');
SELECT is(pg_temp.thread_state('destination'), pg_temp.saved('before'),
    'S3.6 destination transcript, head, list and references unchanged');

------------------------------------------------------------------------------
-- S19: the fork-root insert fails after the transcript was staged.
------------------------------------------------------------------------------
SELECT pg_temp.reset();
SELECT pg_temp.append_source();
SELECT pg_temp.acquire('destination', 'destination');
CREATE FUNCTION pg_temp.s19_fail() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'S19 forced failure (destination transcript staged: %)',
        EXISTS (SELECT 1 FROM sandbox_persist.messages WHERE thread_id = NEW.thread_id)
        USING DETAIL = 'S19_FORCED: test trigger on fork-root inserts';
END
$$;
CREATE TRIGGER s19_fail_fork_root BEFORE INSERT ON sandbox_persist.checkpoints
    FOR EACH ROW WHEN (NEW.reason = 'fork-root') EXECUTE FUNCTION pg_temp.s19_fail();
SELECT pg_temp.save('before', pg_temp.thread_state('destination'));
SELECT pg_temp.save('source before', pg_temp.thread_state('source'));
SELECT is(pg_temp.sp(pg_temp.fork_sql(pg_temp.wr('destination'))),
    'P0001 S19_FORCED',
    'S19.1 the fork fails with the trigger''s error');
SELECT is(pg_temp.errmsg(pg_temp.fork_sql(pg_temp.wr('destination'))),
    'S19 forced failure (destination transcript staged: t)',
    'S19.2 the transcript had been staged when the fork-root insert failed');
SELECT ok(NOT pg_temp.has_transcript_row('destination'),
    'S19.3 no destination transcript row is left');
SELECT is(sandbox_persist.checkpoint_list('destination')::text, '[]',
    'S19.4 no destination checkpoint is left');
SELECT is(sandbox_persist.checkpoint_get_head('destination'), NULL,
    'S19.5 no destination head is left');
SELECT is(pg_temp.thread_state('destination'), pg_temp.saved('before'),
    'S19.6 destination state and references unchanged');
SELECT is(pg_temp.thread_state('source'), pg_temp.saved('source before'),
    'S19.7 source state unchanged');
DROP TRIGGER s19_fail_fork_root ON sandbox_persist.checkpoints;
SELECT is(pg_temp.sp(pg_temp.fork_sql(pg_temp.wr('destination'))), 'no error',
    'S19.8 without the trigger the same fork then succeeds (nothing was left behind)');
SELECT is(sandbox_persist.checkpoint_get_head('destination'), 'fork-root',
    'S19.9 and the fork root is the destination head');

SELECT * FROM finish();
ROLLBACK;
