-- A short walk through every store, run by `make run`. Each step prints what
-- the store returns, so a newcomer sees the JSON shapes the contract fixes.
\pset format unaligned
\pset tuples_only on
\set ECHO none
SET search_path = sandbox_persist, public;

\echo '== sandbox instances: upsert is a full replace, get returns only record keys'
SELECT instance_upsert('{"key":"demo-instance","provider":"docker","providerSandboxId":"sb-1","latestSnapshotId":"snap-1","threadId":"demo-thread","updatedAt":1700000000000}');
SELECT instance_get('demo-instance');
SELECT instance_upsert('{"key":"demo-instance","provider":"docker","providerSandboxId":"sb-2","threadId":"demo-thread","updatedAt":1700000000001}');
\echo '-- after a re-upsert without latestSnapshotId, the key is gone:'
SELECT instance_get('demo-instance');

\echo ''
\echo '== runs: createOrResume never resurrects; patches are key-presence aware'
SELECT run_create_or_resume('{"runId":"demo-run","threadId":"demo-thread","startedAt":1000}');
SELECT run_update('demo-run', '{"sandboxKey":"demo-instance","detachedSince":5000,"driverEpoch":1}');
SELECT run_list_reclaimable(10000, 5000);
\echo '-- detachedSince: null clears it (re-attach), the other fields stay:'
SELECT run_update('demo-run', '{"detachedSince":null,"cancelRequested":false}');
SELECT run_get('demo-run');
SELECT run_find_active_run('demo-thread');
SELECT run_update('demo-run', '{"status":"completed","finishedAt":2000,"usage":{"promptTokens":3,"completionTokens":4,"totalTokens":7}}');
\echo '-- a resume after completion returns the stored run unchanged:'
SELECT run_create_or_resume('{"runId":"demo-run","threadId":"other","startedAt":1,"status":"running"}');
SELECT run_list_by_thread('demo-thread');

\echo ''
\echo '== messages: the transcript is kept byte for byte, escaped NUL included'
SELECT message_save_thread('demo-thread', '[{"role":"user","content":"cat a.bin"},{"role":"tool","toolCallId":"t1","content":"\u0000ELF"}]');
SELECT message_load_thread('demo-thread');
SELECT message_load_thread('never-saved');

\echo ''
\echo '== checkpoints: lease -> append -> append -> fork'
SELECT checkpoint_acquire_writer('demo-thread') AS writer \gset
SELECT :'writer';
SELECT checkpoint_append(json_build_object(
    'checkpoint', json_build_object(
        'id', 'demo-cp-1', 'threadId', 'demo-thread', 'parentCheckpointId', NULL,
        'createdAt', 1, 'reason', 'automatic', 'sourceRunId', 'demo-run',
        'files', json_build_array(
            json_build_object('path', 'src/main.ts', 'kind', 'file', 'size', 12,
                'blobKey', 'sandbox-files/sha256/' || repeat('a', 64)),
            json_build_object('path', 'empty-dir', 'kind', 'dir')),
        'artifacts', '[]'::json),
    'expectedHeadId', NULL, 'writer', :'writer'::json),
    message_load_thread('demo-thread'));
SELECT checkpoint_append(json_build_object(
    'checkpoint', json_build_object(
        'id', 'demo-cp-2', 'threadId', 'demo-thread', 'parentCheckpointId', 'demo-cp-1',
        'createdAt', 2, 'reason', 'named', 'label', 'before refactor',
        'files', json_build_array(
            json_build_object('path', 'src/main.ts', 'kind', 'file', 'size', 12,
                'blobKey', 'sandbox-files/sha256/' || repeat('a', 64))),
        'artifacts', '[]'::json),
    'expectedHeadId', 'demo-cp-1', 'writer', :'writer'::json),
    message_load_thread('demo-thread'));
SELECT checkpoint_get_head('demo-thread');
SELECT checkpoint_list_blob_references();
\echo '-- a second writer is refused while the lease is live:'
DO $$
BEGIN
    PERFORM sandbox_persist.checkpoint_acquire_writer('demo-thread');
EXCEPTION WHEN OTHERS THEN
    RAISE NOTICE '% %', SQLSTATE, SQLERRM;
END
$$;
SELECT checkpoint_release_writer(:'writer'::json);
\echo '-- fork the first checkpoint into a new thread (needs the destination lease):'
SELECT checkpoint_acquire_writer('demo-fork') AS dest_writer \gset
SELECT checkpoint_fork_from_checkpoint(json_build_object(
    'sourceThreadId', 'demo-thread', 'sourceCheckpointId', 'demo-cp-1',
    'destinationThreadId', 'demo-fork', 'destinationCheckpointId', 'demo-fork-root',
    'createdAt', 3, 'writer', :'dest_writer'::json));
SELECT checkpoint_release_writer(:'dest_writer'::json);
\echo '-- the fork copied the conversation into the new thread''s transcript:'
SELECT message_load_thread('demo-fork');
SELECT checkpoint_list_blob_references();

\echo ''
\echo '== interrupts: created pending, resolved in one atomic batch'
SELECT interrupt_create('{"interruptId":"demo-approval","runId":"demo-run","threadId":"demo-thread","requestedAt":100,"payload":{"tool":"rm","args":["-rf","build"]}}');
SELECT interrupt_list_pending('demo-thread');
SELECT interrupt_commit_batch('[{"interruptId":"demo-approval","status":"resolved","response":{"approved":true}}]');
SELECT interrupt_get('demo-approval');

\echo ''
\echo '== metadata: (namespace, key) -> any JSON value'
SELECT metadata_set('ui', 'sidebar', '"left"');
SELECT metadata_get('ui', 'sidebar');

\echo ''
\echo '== generation runs and artifacts'
SELECT generation_run_create_or_resume('{"runId":"demo-gen","threadId":"demo-thread","activity":"image","provider":"openai","model":"gpt-image-1","startedAt":100}');
SELECT generation_run_update('demo-gen', '{"status":"completed","finishedAt":200,"result":null}');
SELECT generation_run_find_latest_for_thread('demo-thread');
SELECT artifact_save('{"artifactId":"demo-art","runId":"demo-gen","threadId":"demo-thread","name":"cat.png","mimeType":"image/png","size":4,"blobKey":"artifacts/demo-gen/demo-art","createdAt":150}');
SELECT artifact_list_for_thread('demo-thread');

\echo ''
\echo '== blobs: chunked and zstd-compressed, read in ranges, uploaded in pieces'
SELECT blob_put('artifacts/demo-gen/demo-art', '\x89504e47', '{"contentType":"image/png"}');
SELECT record, body FROM blob_get('artifacts/demo-gen/demo-art', 1, 2);
SELECT blob_upload_begin('logs/demo.txt', '{"contentType":"text/plain"}') AS upload \gset
SELECT blob_upload_append(:'upload', 0, convert_to('hello, ', 'UTF8'));
SELECT blob_upload_append(:'upload', 7, convert_to('world', 'UTF8'));
SELECT blob_upload_commit(:'upload');
SELECT convert_from(body, 'UTF8') FROM blob_get('logs/demo.txt');
SELECT blob_list('logs/');

\echo ''
\echo '== durable runs: a lock, a claim, the event log'
SELECT run_create_or_resume('{"runId":"demo-durable","threadId":"demo-thread","startedAt":300}');
SELECT lock_acquire('run-driver:demo-durable', 15000) AS lease \gset
SELECT :'lease';
\echo '-- a second driver gets NULL at once (the client waits and retries):'
SELECT lock_acquire('run-driver:demo-durable', 15000) IS NULL AS held_elsewhere;
SELECT run_claim('demo-durable');
SELECT event_log_append('demo-durable', '[{"type":"RUN_STARTED"},{"type":"TEXT_MESSAGE_CONTENT","delta":"hi"}]', '{"producerId":"00000000-0000-4000-8000-000000000001","producerSeq":1}');
\echo '-- a retry of the same producer batch returns the same numbers and appends nothing:'
SELECT event_log_append('demo-durable', '[{"type":"RUN_STARTED"},{"type":"TEXT_MESSAGE_CONTENT","delta":"hi"}]', '{"producerId":"00000000-0000-4000-8000-000000000001","producerSeq":1}');
SELECT event_log_read('demo-durable', 1);
SELECT event_log_close('demo-durable');
SELECT lock_release('run-driver:demo-durable', :'lease'::json->>'ownerToken');

\echo ''
\echo '== maintenance: bounded, idempotent, never touches run state'
SELECT maintain();
\x on
SELECT * FROM overview;
\x off
