-- Dump-and-restore suite, step 2: the same further writes to every store, run
-- in the source and in the restored database, as the application role. Each
-- write prints one line "W <store> <label> <result>"; random values (owner
-- tokens, upload ids) are left out of the printed results. Errors are
-- printed too (the caller counts them) and the script goes on.
\set ON_ERROR_STOP 0
\pset format unaligned
\pset tuples_only on
\pset fieldsep '\t'
SET client_min_messages = warning;
SET ROLE :"app";
SET search_path = sandbox_persist;

-- sandbox instances
SELECT 'W', 'instances', 'upsert 1', instance_upsert(json_build_object('key', 'bk-inst-1',
    'provider', 'docker', 'providerSandboxId', 'sb-1b', 'threadId', 'bk-thread',
    'latestRunId', 'bk-run-d', 'updatedAt', :t0 + 100));
SELECT 'W', 'instances', 'upsert 3', instance_upsert(json_build_object('key', 'bk-inst-3',
    'provider', 'docker', 'providerSandboxId', 'sb-3', 'threadId', 'bk-thread-3', 'updatedAt', :t0 + 100));
SELECT 'W', 'instances', 'delete 2', instance_delete('bk-inst-2');

-- runs: a fourth run tied with the first three (its seq decides the order)
SELECT 'W', 'runs', 'create d', run_create_or_resume('{"runId":"bk-run-d","threadId":"bk-thread","startedAt":1000}');
SELECT 'W', 'runs', 'resume done', run_create_or_resume('{"runId":"bk-run-done","threadId":"x","startedAt":1}');
SELECT 'W', 'runs', 'update a', run_update('bk-run-a', '{"status":"completed","finishedAt":3000}');
SELECT 'W', 'runs', 'update b', run_update('bk-run-b', '{"detachedSince":null,"cancelRequested":true}');
SELECT 'W', 'runs', 'claim c', run_claim('bk-run-c');

-- messages
SELECT 'W', 'messages', 'save thread', message_save_thread('bk-thread',
    '[{"role":"user","content":"hi \u0000 there"},{"role":"assistant","content":"hello"},{"role":"user","content":"after restore"}]');
SELECT 'W', 'messages', 'save new thread', message_save_thread('bk-thread-3', '[]');

-- checkpoints: a new thread whose one message is new (its id comes from the
-- sequence), then renew the lease taken before the dump, append with a new
-- conversation message, delete a head, fork
SELECT metadata_get('backup', 'writer') AS writer \gset
SELECT metadata_get('backup', 'fork_writer') AS fork_writer \gset
SELECT checkpoint_acquire_writer('bk-thread-3', 3600000, :t0 + 998) AS writer3 \gset
SELECT 'W', 'checkpoints', 'append new thread', checkpoint_append(json_build_object('checkpoint', json_build_object(
        'id', 'bk-cp-t3', 'threadId', 'bk-thread-3', 'parentCheckpointId', NULL,
        'createdAt', 60, 'reason', 'automatic', 'files', '[]'::json, 'artifacts', '[]'::json),
    'expectedHeadId', NULL, 'writer', :'writer3'::json),
    '[{"role":"user","content":"new thread"}]', :t0 + 999);
SELECT 'W', 'checkpoints', 'renew writer',
    checkpoint_renew_writer(:'writer'::json, 3600000, :t0 + 1000)::jsonb - 'ownerToken';
SELECT 'W', 'checkpoints', 'append 3', checkpoint_append(json_build_object('checkpoint', json_build_object(
        'id', 'bk-cp-3', 'threadId', 'bk-thread', 'parentCheckpointId', 'bk-cp-2',
        'createdAt', 40, 'reason', 'automatic',
        'files', json_build_array(
            json_build_object('path', 'src/b.ts', 'kind', 'file', 'size', 5,
                'blobKey', 'sandbox-files/sha256/' || encode(sha256('world'), 'hex'))),
        'artifacts', '[]'::json),
    'expectedHeadId', 'bk-cp-2', 'writer', :'writer'::json),
    message_load_thread('bk-thread'), :t0 + 1001);
SELECT 'W', 'checkpoints', 'release writer', checkpoint_release_writer(:'writer'::json);
SELECT 'W', 'checkpoints', 'delete fork head', checkpoint_delete_head(json_build_object(
    'threadId', 'bk-fork', 'checkpointId', 'bk-fork-root', 'writer', :'fork_writer'::json), :t0 + 1002);
SELECT checkpoint_acquire_writer('bk-fork-2', 3600000, :t0 + 1003) AS fork2_writer \gset
SELECT 'W', 'checkpoints', 'fork 3', checkpoint_fork_from_checkpoint(json_build_object(
    'sourceThreadId', 'bk-thread', 'sourceCheckpointId', 'bk-cp-3',
    'destinationThreadId', 'bk-fork-2', 'destinationCheckpointId', 'bk-fork-2-root',
    'createdAt', 50, 'writer', :'fork2_writer'::json), :t0 + 1004);

-- interrupts: a fourth tied with the first three
SELECT 'W', 'interrupts', 'create 4', interrupt_create('{"interruptId":"bk-int-4","runId":"bk-run-a","threadId":"bk-thread","requestedAt":100,"payload":{"n":4}}');
SELECT 'W', 'interrupts', 'cancel 2', interrupt_cancel('bk-int-2', :t0 + 1100);
SELECT 'W', 'interrupts', 'commit batch', interrupt_commit_batch('[{"interruptId":"bk-int-3","status":"resolved","response":null}]', :t0 + 1101);

-- metadata
SELECT 'W', 'metadata', 'set', metadata_set('ui', 'theme', '"dark"');
SELECT 'W', 'metadata', 'replace', metadata_set('ui', 'nested', '[]');
SELECT 'W', 'metadata', 'delete', metadata_delete('ui', 'sidebar');

-- generation runs: a third tied with the first two
SELECT 'W', 'generation runs', 'create 3', generation_run_create_or_resume('{"runId":"bk-gen-3","threadId":"bk-thread","activity":"video","provider":"openai","model":"m3","startedAt":100}');
SELECT 'W', 'generation runs', 'update 2', generation_run_update('bk-gen-2', '{"status":"failed","finishedAt":300,"error":{"message":"x"}}');
SELECT 'W', 'generation runs', 'clear 1', generation_run_update('bk-gen-1', '{}', '["result"]');

-- artifacts
SELECT 'W', 'artifacts', 'save 3', artifact_save('{"artifactId":"bk-art-3","runId":"bk-gen-3","threadId":"bk-thread","name":"v.mp4","mimeType":"video/mp4","size":9,"createdAt":150}');
SELECT 'W', 'artifacts', 'save 4', artifact_save('{"artifactId":"bk-art-4","runId":"bk-gen-2","threadId":"bk-thread","name":"a.wav","mimeType":"audio/wav","size":2,"createdAt":160}');
SELECT 'W', 'artifacts', 'delete 2', artifact_delete('bk-art-2');
SELECT 'W', 'artifacts', 'delete for run', artifact_delete_for_run('bk-gen-2');

-- blobs: new object, overwrite, content-addressed put and head, the upload
-- begun before the dump finished now, a new upload aborted, a delete
SELECT 'W', 'blobs', 'put new', blob_put('bk/new.txt', 'new', NULL, :t0 + 1200);
SELECT 'W', 'blobs', 'overwrite', blob_put('artifacts/bk-gen-1/bk-art-1', '\x89504e470d0a', '{"contentType":"image/png"}', :t0 + 1201);
SELECT 'W', 'blobs', 'put content-addressed', blob_put('sandbox-files/sha256/' || encode(sha256('world'), 'hex'), 'world', NULL, :t0 + 1202);
SELECT 'W', 'blobs', 'head content-addressed', blob_head('sandbox-files/sha256/' || encode(sha256('hello'), 'hex'), :t0 + 1203);
SELECT metadata_get('backup', 'upload') #>> '{}' AS up2 \gset
SELECT 'W', 'blobs', 'upload append', blob_upload_append(:'up2', 12, convert_to('second part', 'UTF8'), :t0 + 1204);
SELECT 'W', 'blobs', 'upload commit', blob_upload_commit(:'up2', :t0 + 1205);
SELECT blob_upload_begin('bk/aborted.txt', NULL, :t0 + 1206) AS up3 \gset
SELECT 'W', 'blobs', 'upload abort', blob_upload_abort(:'up3');
SELECT 'W', 'blobs', 'delete', blob_delete('bk/large.bin');

-- locks: renew the lease held across the dump, take new ones (their fences)
SELECT metadata_get('backup', 'lock_c') AS lock_c \gset
SELECT 'W', 'locks', 'renew c', lock_renew('run-driver:bk-run-c', :'lock_c'::json->>'ownerToken', 600000, :t0 + 1300)::jsonb - 'ownerToken';
SELECT 'W', 'locks', 'check c', lock_check('run-driver:bk-run-c', :'lock_c'::json->>'ownerToken', (:'lock_c'::json->>'fence')::bigint, :t0 + 1301);
SELECT lock_acquire('bk-lock-2', 600000, :t0 + 1302) AS lock_2 \gset
SELECT 'W', 'locks', 'acquire 2', :'lock_2'::jsonb - 'ownerToken';
SELECT 'W', 'locks', 'acquire 3 (held)', lock_acquire('bk-lock-3', 600000, :t0 + 1303);
SELECT 'W', 'locks', 'renew many', (SELECT json_agg(json_build_object('renewed', json_array_length(r->'renewed'), 'lost', r->'lost'))
    FROM (SELECT lock_renew_many(json_build_array(
        json_build_object('key', 'bk-lock-2', 'ownerToken', :'lock_2'::json->>'ownerToken'),
        json_build_object('key', 'bk-lock-3', 'ownerToken', '00000000-0000-4000-8000-000000000000')),
        600000, :t0 + 1304) AS r) s);
SELECT 'W', 'locks', 'release 2', lock_release('bk-lock-2', :'lock_2'::json->>'ownerToken');
SELECT lock_acquire('bk-lock-4', 600000, :t0 + 1305) AS lock_4 \gset
SELECT 'W', 'locks', 'acquire 4', :'lock_4'::jsonb - 'ownerToken';

-- event logs: a retried producer batch, a new batch, a new run's log, close
SELECT 'W', 'event logs', 'retry', event_log_append('bk-run-c', '[{"type":"TEXT","delta":"b"}]',
    '{"producerId":"00000000-0000-4000-8000-00000000000b","producerSeq":2}');
SELECT 'W', 'event logs', 'append c', event_log_append('bk-run-c', '[{"type":"TEXT","delta":"c"},{"type":"RUN_FINISHED"}]',
    '{"producerId":"00000000-0000-4000-8000-00000000000b","producerSeq":3,"fenceEpoch":2}');
SELECT 'W', 'event logs', 'new log d', event_log_append('bk-run-d', '[{"type":"RUN_STARTED"}]',
    '{"producerId":"00000000-0000-4000-8000-00000000000d","producerSeq":1}');
SELECT 'W', 'event logs', 'close c', event_log_close('bk-run-c');

-- maintenance, two hours later: purges, closes, watchdog items
SELECT 'W', 'maintenance', 'heartbeat', reaper_heartbeat('bk-replica-2', NULL, :t0 + 7200000);
SELECT 'W', 'maintenance', 'maintain', maintain(1000, :t0 + 7200000);
