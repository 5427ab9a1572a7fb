-- pgTAP: the thread-owned state registry (sandbox_persist.thread_owned_state)
-- as seen by checkpoint_fork_from_checkpoint
-- (docs/contract/checkpoint-store.md §7.2).
-- Cases: R24 (generation run, interrupt and artifact-record parts) and R25
-- (metadata part). The transcript, run and checkpoint parts of R24 and the
-- instance and lease parts of R25 are in fork.sql, numbered from 1; the
-- assertions here are numbered from 20 so the two files never share an ID.
-- Run with: pg_prove -d <db> test/pgtap/fork_registry.sql (needs allow_test_reset).
BEGIN;
SELECT plan(25);
SELECT sandbox_persist._reset_for_tests();

------------------------------------------------------------------------------
-- Helpers (temporary, gone at ROLLBACK).
------------------------------------------------------------------------------

-- Writers (whole acquire results, passed back unchanged as upstream does).
CREATE TEMP TABLE w (thread text PRIMARY KEY, writer json NOT NULL);
CREATE TEMP TABLE saved (name text PRIMARY KEY, value text);

CREATE FUNCTION pg_temp.acquire(thread text) RETURNS json LANGUAGE sql AS $$
    INSERT INTO w VALUES (thread, sandbox_persist.checkpoint_acquire_writer(thread))
    ON CONFLICT (thread) DO UPDATE SET writer = EXCLUDED.writer
    RETURNING writer
$$;

-- Empty store with one source checkpoint 'source-root' in thread 'source'.
CREATE FUNCTION pg_temp.setup() RETURNS void LANGUAGE sql AS $$
    SELECT sandbox_persist._reset_for_tests();
    DELETE FROM w;
    SELECT sandbox_persist.checkpoint_append(json_build_object(
        'checkpoint', json_build_object(
            'id', 'source-root', 'threadId', 'source', 'parentCheckpointId', NULL,
            'createdAt', 10, 'reason', 'automatic', 'files', '[]'::json, 'artifacts', '[]'::json),
        'expectedHeadId', NULL, 'writer', pg_temp.acquire('source')),
        '[{"role":"user","content":"checkpoint conversation"}]');
$$;

-- The statement forking source-root into thread `dest` (checkpoint
-- '<dest>-root'), with a fresh destination lease.
CREATE FUNCTION pg_temp.fork_sql(dest text) RETURNS text LANGUAGE sql AS $$
    SELECT format('SELECT sandbox_persist.checkpoint_fork_from_checkpoint(%L::json)',
        json_build_object(
            'sourceThreadId', 'source', 'sourceCheckpointId', 'source-root',
            'destinationThreadId', dest, 'destinationCheckpointId', dest || '-root',
            'createdAt', 20, 'writer', pg_temp.acquire(dest)))
$$;

-- {sqlstate, detail} of the error a statement raises, or NULL.
CREATE FUNCTION pg_temp.err(sql text) RETURNS text[] LANGUAGE plpgsql AS $$
DECLARE
    st text; det text;
BEGIN
    EXECUTE sql;
    RETURN NULL;
EXCEPTION WHEN OTHERS THEN
    GET STACKED DIAGNOSTICS st = RETURNED_SQLSTATE, det = PG_EXCEPTION_DETAIL;
    RETURN ARRAY[st, det];
END
$$;

-- 'SQLSTATE CODE_NAME' of the error a statement raises ('no error' if none).
CREATE FUNCTION pg_temp.sp(sql text) RETURNS text LANGUAGE sql AS $$
    SELECT CASE WHEN e IS NULL THEN 'no error'
                ELSE e[1] || ' ' || coalesce((SELECT c->>'codeName' FROM json_array_elements(sandbox_persist.error_codes()) c
                                               WHERE c->>'sqlstate' = e[1] AND coalesce(e[2], '') !~ '^[A-Z][A-Z0-9_]+: '),
                                              CASE WHEN e[1] LIKE 'SP%' THEN '<detail: ' || coalesce(e[2], 'none') || '>'
                                                   ELSE split_part(coalesce(e[2], ''), ':', 1) END) END
    FROM (SELECT pg_temp.err(sql) AS e) s
$$;

-- A thread's checkpoint-side state (transcript row, head, list, references)
-- plus every row of the four chat-store tables.
CREATE FUNCTION pg_temp.state(t text) RETURNS text LANGUAGE sql AS $$
    SELECT concat_ws(E'\n',
        json_build_object(
            'transcriptRow', (SELECT transcript::text FROM sandbox_persist.messages WHERE thread_id = t),
            'head', sandbox_persist.checkpoint_get_head(t),
            'checkpoints', sandbox_persist.checkpoint_list(t),
            'references', sandbox_persist.checkpoint_list_blob_references())::text,
        (SELECT string_agg(i::text, E'\n' ORDER BY i.interrupt_id) FROM sandbox_persist.interrupts i),
        (SELECT string_agg(m::text, E'\n' ORDER BY m.namespace, m.meta_key) FROM sandbox_persist.metadata m),
        (SELECT string_agg(g::text, E'\n' ORDER BY g.run_id) FROM sandbox_persist.generation_runs g),
        (SELECT string_agg(a::text, E'\n' ORDER BY a.artifact_id) FROM sandbox_persist.artifacts a))
$$;

CREATE FUNCTION pg_temp.save(name text, value text) RETURNS void LANGUAGE sql AS $$
    INSERT INTO saved VALUES (name, value) ON CONFLICT (name) DO UPDATE SET value = EXCLUDED.value
$$;
CREATE FUNCTION pg_temp.saved(name text) RETURNS text LANGUAGE sql AS $$
    SELECT value FROM saved s WHERE s.name = saved.name
$$;

------------------------------------------------------------------------------
-- R24: a generation run of the destination thread blocks the fork.
------------------------------------------------------------------------------
SELECT pg_temp.setup();
SELECT sandbox_persist.generation_run_create_or_resume(
    '{"runId":"gen-d","threadId":"dest-gen","activity":"image","provider":"p","model":"m","startedAt":1}');
SELECT pg_temp.save('before', pg_temp.state('dest-gen'));
SELECT pg_temp.save('fork', pg_temp.fork_sql('dest-gen'));
SELECT is(pg_temp.sp(pg_temp.saved('fork')), 'SP011 SANDBOX_SNAPSHOT_FORK_DESTINATION_NOT_EMPTY',
    'R24.20 a generation run of the destination thread blocks the fork -> SP011');
SELECT matches((pg_temp.err(pg_temp.saved('fork')))[2], 'generation run',
    'R24.21 the errdetail names the generation run as the blocking state');
SELECT ok(sandbox_persist.checkpoint_get_head('dest-gen') IS NULL,
    'R24.22 the destination has no head after the refused fork');
SELECT is(pg_temp.state('dest-gen'), pg_temp.saved('before'),
    'R24.23 destination transcript (no row), list, references and the generation run unchanged');
SELECT is(sandbox_persist.generation_run_update('gen-d', '{"status":"completed","finishedAt":2}'), true,
    'R24.24 a completed generation run ...');
SELECT is(pg_temp.sp(pg_temp.saved('fork')), 'SP011 SANDBOX_SNAPSHOT_FORK_DESTINATION_NOT_EMPTY',
    'R24.25 ... still blocks the fork (row existence, not status)');

------------------------------------------------------------------------------
-- R24: an interrupt of the destination thread blocks the fork.
------------------------------------------------------------------------------
SELECT pg_temp.setup();
SELECT sandbox_persist.interrupt_create(
    '{"interruptId":"int-d","runId":"run-elsewhere","threadId":"dest-int","requestedAt":1,"payload":{}}');
SELECT pg_temp.save('before', pg_temp.state('dest-int'));
SELECT pg_temp.save('fork', pg_temp.fork_sql('dest-int'));
SELECT is(pg_temp.sp(pg_temp.saved('fork')), 'SP011 SANDBOX_SNAPSHOT_FORK_DESTINATION_NOT_EMPTY',
    'R24.26 a pending interrupt of the destination thread blocks the fork -> SP011');
SELECT matches((pg_temp.err(pg_temp.saved('fork')))[2], 'interrupt',
    'R24.27 the errdetail names the interrupt as the blocking state');
SELECT ok(sandbox_persist.checkpoint_get_head('dest-int') IS NULL,
    'R24.28 the destination has no head after the refused fork');
SELECT is(pg_temp.state('dest-int'), pg_temp.saved('before'),
    'R24.29 destination transcript (no row), list, references and the interrupt unchanged');
SELECT sandbox_persist.interrupt_cancel('int-d');
SELECT is(pg_temp.sp(pg_temp.saved('fork')), 'SP011 SANDBOX_SNAPSHOT_FORK_DESTINATION_NOT_EMPTY',
    'R24.30 a cancelled interrupt of the destination still blocks the fork');
SELECT ok(sandbox_persist.checkpoint_get_head('dest-int') IS NULL,
    'R24.31 still no head');

------------------------------------------------------------------------------
-- R24: an artifact-store record of the destination thread blocks the fork.
------------------------------------------------------------------------------
SELECT pg_temp.setup();
SELECT sandbox_persist.artifact_save(
    '{"artifactId":"art-d","runId":"run-elsewhere","threadId":"dest-art","name":"a.png","mimeType":"image/png","size":1,"createdAt":1}');
SELECT pg_temp.save('before', pg_temp.state('dest-art'));
SELECT pg_temp.save('fork', pg_temp.fork_sql('dest-art'));
SELECT is(pg_temp.sp(pg_temp.saved('fork')), 'SP011 SANDBOX_SNAPSHOT_FORK_DESTINATION_NOT_EMPTY',
    'R24.32 an artifact record of the destination thread blocks the fork -> SP011');
SELECT matches((pg_temp.err(pg_temp.saved('fork')))[2], 'artifact',
    'R24.33 the errdetail names the artifact record as the blocking state');
SELECT ok(sandbox_persist.checkpoint_get_head('dest-art') IS NULL,
    'R24.34 the destination has no head after the refused fork');
SELECT is(pg_temp.state('dest-art'), pg_temp.saved('before'),
    'R24.35 destination transcript (no row), list, references and the artifact record unchanged');
-- Re-saving the record into another thread moves it out of the destination.
SELECT sandbox_persist.artifact_save(
    '{"artifactId":"art-d","runId":"run-elsewhere","threadId":"thread-elsewhere","name":"a.png","mimeType":"image/png","size":1,"createdAt":1}');
SELECT is(pg_temp.sp(pg_temp.saved('fork')), 'no error',
    'R24.36 once the record was moved to another thread, the destination can be forked into');
SELECT is(sandbox_persist.checkpoint_get_head('dest-art'), 'dest-art-root',
    'R24.37 the fork root is then the destination head');

------------------------------------------------------------------------------
-- Control: the same kinds of state in other threads do not block.
------------------------------------------------------------------------------
SELECT pg_temp.setup();
SELECT sandbox_persist.generation_run_create_or_resume(
    '{"runId":"dest-free","threadId":"other-thread","activity":"image","provider":"p","model":"m","startedAt":1}');
SELECT sandbox_persist.interrupt_create(
    '{"interruptId":"dest-free","runId":"dest-free","threadId":"other-thread","requestedAt":1,"payload":{"threadId":"dest-free"}}');
SELECT sandbox_persist.artifact_save(
    '{"artifactId":"dest-free","runId":"dest-free","threadId":"other-thread","name":"n","mimeType":"m","size":1,"createdAt":1}');
SELECT is(pg_temp.sp(pg_temp.fork_sql('dest-free')), 'no error',
    'R24.38 records of other threads whose ids equal the destination id do not block the fork');
SELECT is(sandbox_persist.checkpoint_get_head('dest-free'), 'dest-free-root',
    'R24.39 the fork root is the destination head');

------------------------------------------------------------------------------
-- R25: metadata entries do not block a fork.
------------------------------------------------------------------------------
SELECT pg_temp.setup();
SELECT sandbox_persist.metadata_set('dest-meta', 'dest-meta', '{"threadId":"dest-meta"}');
SELECT sandbox_persist.metadata_set('thread', 'dest-meta', '"left"');
SELECT pg_temp.save('metadata', (SELECT string_agg(m::text, E'\n' ORDER BY m.namespace, m.meta_key)
                                 FROM sandbox_persist.metadata m));
SELECT is(pg_temp.sp(pg_temp.fork_sql('dest-meta')), 'no error',
    'R25.20 a destination that only has metadata entries (namespace or key equal to its id) can be forked into');
SELECT is(sandbox_persist.checkpoint_get_head('dest-meta'), 'dest-meta-root',
    'R25.21 the fork root is the destination head');
SELECT is(sandbox_persist.message_load_thread('dest-meta')::jsonb,
    '[{"role":"user","content":"checkpoint conversation"}]'::jsonb,
    'R25.22 the destination transcript is the checkpoint conversation');
SELECT is((SELECT string_agg(m::text, E'\n' ORDER BY m.namespace, m.meta_key) FROM sandbox_persist.metadata m),
    pg_temp.saved('metadata'),
    'R25.23 the metadata entries are untouched');
SELECT is((SELECT count(*) FROM sandbox_persist.thread_owned_state WHERE source = 'metadata'), 0::bigint,
    'R25.24 metadata never appears in the thread-owned state registry');

SELECT * FROM finish();
ROLLBACK;
