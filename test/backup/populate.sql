-- Dump-and-restore suite, step 1 (source database only): state in every
-- store. Run by a superuser with :t0 (epoch ms) and :app (an application role
-- given the store functions by grant_app_role); every write but the grant runs
-- as that role, through the functions. Times are injected (now_ms) from :t0,
-- so both databases later see the same clock. A few values (a writer, a lock
-- token, an upload id) are kept in the metadata store for the later writes.
\set ON_ERROR_STOP 1
SET client_min_messages = warning;
SELECT sandbox_persist.grant_app_role(:'app');
SET ROLE :"app";
SET search_path = sandbox_persist;
\set q '\'\''

-- sandbox instances
SELECT instance_upsert(json_build_object('key', 'bk-inst-1', 'provider', 'docker',
    'providerSandboxId', 'sb-1', 'latestSnapshotId', 'snap-1', 'threadId', 'bk-thread',
    'latestRunId', 'bk-run-a', 'updatedAt', :t0));
SELECT instance_upsert(json_build_object('key', 'bk-inst-2', 'provider', 'e2b',
    'providerSandboxId', 'sb-2', 'threadId', 'bk-thread-2', 'updatedAt', :t0 - 86400000));

-- runs: three running runs of one thread with the same startedAt, so their
-- order is the insertion order (runs.seq); one detached, one claimed
SELECT run_create_or_resume('{"runId":"bk-run-a","threadId":"bk-thread","startedAt":1000}');
SELECT run_create_or_resume('{"runId":"bk-run-b","threadId":"bk-thread","startedAt":1000}');
SELECT run_create_or_resume('{"runId":"bk-run-c","threadId":"bk-thread","startedAt":1000}');
SELECT run_update('bk-run-b', '{"sandboxKey":"bk-inst-1","detachedSince":2000,"usage":{"totalTokens":3}}');
SELECT run_claim('bk-run-c');
SELECT run_create_or_resume('{"runId":"bk-run-done","threadId":"bk-thread-2","startedAt":500}');
SELECT run_update('bk-run-done', '{"status":"failed","finishedAt":900,"error":{"message":"boom","code":"E1"}}');

-- messages: the exact text, an escaped NUL included
SELECT message_save_thread('bk-thread', '[{"role":"user","content":"hi \u0000 there"},{"role":"assistant","content":"hello"}]');

-- checkpoints: a lease, two appends (files with blob references, an
-- artifact, a conversation), a fork into a second thread
SELECT checkpoint_acquire_writer('bk-thread', 3600000, :t0) AS writer \gset
SELECT metadata_set('backup', 'writer', :'writer');
SELECT checkpoint_append(json_build_object('checkpoint', json_build_object(
        'id', 'bk-cp-1', 'threadId', 'bk-thread', 'parentCheckpointId', NULL,
        'createdAt', 10, 'reason', 'automatic', 'sourceRunId', 'bk-run-a',
        'files', json_build_array(
            json_build_object('path', 'src/a.ts', 'kind', 'file', 'size', 5,
                'blobKey', 'sandbox-files/sha256/' || encode(sha256('hello'), 'hex')),
            json_build_object('path', 'dir', 'kind', 'dir')),
        'artifacts', json_build_array(json_build_object('artifactId', 'bk-cp-art',
            'name', 'n.txt', 'mimeType', 'text/plain', 'size', 5,
            'blobKey', 'sandbox-artifacts/sha256/' || repeat('e', 64), 'createdAt', 10))),
    'expectedHeadId', NULL, 'writer', :'writer'::json),
    message_load_thread('bk-thread'), :t0 + 1);
SELECT checkpoint_append(json_build_object('checkpoint', json_build_object(
        'id', 'bk-cp-2', 'threadId', 'bk-thread', 'parentCheckpointId', 'bk-cp-1',
        'createdAt', 20, 'reason', 'named', 'label', 'second',
        'files', json_build_array(
            json_build_object('path', 'src/a.ts', 'kind', 'file', 'size', 5,
                'blobKey', 'sandbox-files/sha256/' || encode(sha256('hello'), 'hex'))),
        'artifacts', '[]'::json),
    'expectedHeadId', 'bk-cp-1', 'writer', :'writer'::json),
    '[{"role":"user","content":"hi \u0000 there"},{"role":"assistant","content":"hello"},{"role":"user","content":"more"}]',
    :t0 + 2);
SELECT checkpoint_acquire_writer('bk-fork', 3600000, :t0) AS fork_writer \gset
SELECT checkpoint_fork_from_checkpoint(json_build_object(
    'sourceThreadId', 'bk-thread', 'sourceCheckpointId', 'bk-cp-1',
    'destinationThreadId', 'bk-fork', 'destinationCheckpointId', 'bk-fork-root',
    'createdAt', 30, 'writer', :'fork_writer'::json), :t0 + 3);
SELECT metadata_set('backup', 'fork_writer', :'fork_writer');

-- interrupts: three with the same requestedAt (order is the insertion order)
SELECT interrupt_create('{"interruptId":"bk-int-1","runId":"bk-run-a","threadId":"bk-thread","requestedAt":100,"payload":{"tool":"rm"}}');
SELECT interrupt_create('{"interruptId":"bk-int-2","runId":"bk-run-a","threadId":"bk-thread","requestedAt":100,"payload":{"list":[1,2]}}');
SELECT interrupt_create('{"interruptId":"bk-int-3","runId":"bk-run-b","threadId":"bk-thread","requestedAt":100,"payload":{}}');
SELECT interrupt_resolve('bk-int-1', '{"approved":true}', :t0 + 4);

-- metadata
SELECT metadata_set('ui', 'sidebar', '"left"');
SELECT metadata_set('ui', 'nested', '{"a":[1,2,{"b":null}]}');

-- generation runs: two of one thread with the same startedAt
SELECT generation_run_create_or_resume('{"runId":"bk-gen-1","threadId":"bk-thread","activity":"image","provider":"openai","model":"m1","startedAt":100}');
SELECT generation_run_create_or_resume('{"runId":"bk-gen-2","threadId":"bk-thread","activity":"audio","provider":"openai","model":"m2","startedAt":100}');
SELECT generation_run_update('bk-gen-1', '{"status":"completed","finishedAt":200,"result":null,"usage":{"totalTokens":1}}');

-- artifacts
SELECT artifact_save('{"artifactId":"bk-art-1","runId":"bk-gen-1","threadId":"bk-thread","name":"cat.png","mimeType":"image/png","size":4,"blobKey":"artifacts/bk-gen-1/bk-art-1","createdAt":150}');
SELECT artifact_save('{"artifactId":"bk-art-2","runId":"bk-gen-1","threadId":"bk-thread","name":"dog.png","mimeType":"image/png","size":3,"sourceUrl":"https://example.invalid/d","createdAt":150.5}');

-- blobs: plain, content-addressed, multi-chunk, a committed and an open upload
SELECT blob_put('artifacts/bk-gen-1/bk-art-1', '\x89504e47', '{"contentType":"image/png","customMetadata":{"k":"v"}}', :t0);
SELECT blob_put('sandbox-files/sha256/' || encode(sha256('hello'), 'hex'), 'hello', NULL, :t0);
SELECT blob_put('bk/large.bin', convert_to(repeat('0123456789abcdef', 40000), 'UTF8'), '{"contentType":"application/octet-stream"}', :t0);
SELECT blob_upload_begin('bk/uploaded.txt', '{"contentType":"text/plain"}', :t0) AS up1 \gset
SELECT blob_upload_append(:'up1', 0, convert_to('hello, ', 'UTF8'), :t0);
SELECT blob_upload_append(:'up1', 7, convert_to('world', 'UTF8'), :t0);
SELECT blob_upload_commit(:'up1', :t0);
SELECT blob_upload_begin('bk/streamed.txt', '{"contentType":"text/plain"}', :t0) AS up2 \gset
SELECT blob_upload_append(:'up2', 0, convert_to('first part; ', 'UTF8'), :t0);
SELECT metadata_set('backup', 'upload', to_json(:'up2'::text));

-- locks: two held, one released (the fence sequence moves on)
SELECT lock_acquire('run-driver:bk-run-c', 600000, :t0) AS lock_c \gset
SELECT metadata_set('backup', 'lock_c', :'lock_c');
SELECT lock_acquire('bk-lock-2', 600000, :t0) AS lock_2 \gset
SELECT lock_release('bk-lock-2', :'lock_2'::json->>'ownerToken');
SELECT lock_acquire('bk-lock-3', 600000, :t0);

-- event logs with the producer ledger, one closed
SELECT event_log_append('bk-run-c', '[{"type":"RUN_STARTED"},{"type":"TEXT","delta":"a"}]',
    '{"producerId":"00000000-0000-4000-8000-00000000000b","producerSeq":1,"fenceEpoch":1}');
SELECT event_log_append('bk-run-c', '[{"type":"TEXT","delta":"b"}]',
    '{"producerId":"00000000-0000-4000-8000-00000000000b","producerSeq":2}');
SELECT event_log_append('bk-run-done', '[{"type":"RUN_ERROR"}]');
SELECT event_log_close('bk-run-done');

-- maintenance bookkeeping
SELECT reaper_heartbeat('bk-replica', '{"reaped":0}', :t0);
SELECT maintain(1000, :t0 + 5);
