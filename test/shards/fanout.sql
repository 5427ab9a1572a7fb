-- pgTAP, run on the router of scripts/shards.sh (2 shards): placement,
-- fan-out merges, id-only reads, blobs on the shards of their references,
-- errors as the shards raise them, durable streams by path. Cases SH1-SH12
-- (docs/sharding.md).
-- The shard calls commit on the shards as they run (PL/Proxy), so the suite
-- starts from _reset_for_tests() instead of relying on its ROLLBACK.
BEGIN;
SELECT plan(102);
SELECT sandbox_persist._reset_for_tests();

\set d '86400000::bigint'
SELECT shard_test.id_on('thread-', 0) AS t0, shard_test.id_on('thread-', 1) AS t1 \gset
SELECT 'sandbox-files/sha256/' || encode(sha256('shared bytes'), 'hex') AS ckey \gset

-- 'SQLSTATE|message|detail' of a statement's error, or 'no error'.
CREATE FUNCTION pg_temp.err(stmt text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    st text; m text; d text;
BEGIN
    EXECUTE stmt;
    RETURN 'no error';
EXCEPTION WHEN OTHERS THEN
    GET STACKED DIAGNOSTICS st = RETURNED_SQLSTATE, m = MESSAGE_TEXT, d = PG_EXCEPTION_DETAIL;
    RETURN st || '|' || m || '|' || coalesce(d, '');
END
$$;

-- The rows of a query on one shard, one text per row, joined by ','.
CREATE FUNCTION pg_temp.on(part integer, q text) RETURNS text LANGUAGE sql AS $$
    SELECT coalesce(string_agg(x, ',' ORDER BY x), '') FROM shard_test.on_part(part, q) AS x
$$;

CREATE FUNCTION pg_temp.cp_input(id text, thread text, k text, expected text, writer json) RETURNS json
LANGUAGE sql AS $$
    SELECT json_build_object(
        'checkpoint', json_build_object('id', id, 'threadId', thread, 'parentCheckpointId', expected,
            'createdAt', 1, 'reason', 'automatic',
            'files', json_build_array(json_build_object('path', id || '.txt', 'kind', 'file',
                                                        'blobKey', k, 'size', 1)),
            'artifacts', '[]'::json),
        'expectedHeadId', expected, 'writer', writer)
$$;

------------------------------------------------------------------------------
-- SH1: placement. hashtext by default, thread_placement overrides it.
------------------------------------------------------------------------------
SELECT isnt(:'t0'::text, :'t1'::text, 'SH1.1 two thread ids that hash to different partitions exist');
SELECT is(sandbox_persist._shard_count(), 2, 'SH1.2 the router has two partitions');
SELECT is(sandbox_persist._shard_of_thread(:'t1'), hashtext(:'t1'), 'SH1.3 without an override a thread''s hash is hashtext(thread id)');
INSERT INTO sandbox_persist.thread_placement VALUES (:'t1', 0);
SELECT is(sandbox_persist._partition(sandbox_persist._shard_of_thread(:'t1')), 0, 'SH1.4 a placement row overrides the hash');
DELETE FROM sandbox_persist.thread_placement;

SELECT sandbox_persist.message_save_thread(:'t0', '[{"m":0}]');
SELECT sandbox_persist.message_save_thread(:'t1', '[{"m":1}]');
SELECT is(pg_temp.on(0, 'SELECT thread_id FROM sandbox_persist.messages'), :'t0', 'SH1.5 a transcript is stored on its thread''s shard only (partition 0)');
SELECT is(pg_temp.on(1, 'SELECT thread_id FROM sandbox_persist.messages'), :'t1', 'SH1.6 ... and partition 1');
SELECT is(sandbox_persist.message_load_thread(:'t1')::text, '[{"m":1}]', 'SH1.7 the router reads each thread from its shard');

------------------------------------------------------------------------------
-- SH2: runs, event logs and run-driver locks live with the run's thread.
------------------------------------------------------------------------------
SELECT sandbox_persist.run_create_or_resume(json_build_object('runId', 'run-a', 'threadId', :'t0', 'startedAt', 10));
SELECT sandbox_persist.run_create_or_resume(json_build_object('runId', 'run-b', 'threadId', :'t1', 'startedAt', 20));
SELECT is(pg_temp.on(1, 'SELECT run_id FROM sandbox_persist.runs'), 'run-b', 'SH2.1 a run is stored on its thread''s shard');
SELECT is(sandbox_persist.run_create_or_resume(json_build_object('runId', 'run-b', 'threadId', :'t0', 'startedAt', 99)) ->> 'threadId',
    :'t1', 'SH2.2 a resume naming a thread on another shard returns the stored run');
SELECT is(pg_temp.on(0, 'SELECT run_id FROM sandbox_persist.runs'), 'run-a', 'SH2.3 ... and creates no copy on the other shard');
SELECT is(sandbox_persist.event_log_append('run-b', '[{"type":"x"}]', '{"producerId":"7c9e6679-7425-40de-944b-e07fc1f90ae7","producerSeq":1}')::text,
    '[1]', 'SH2.4 an append through the router');
SELECT is(pg_temp.on(1, 'SELECT count(*)::text FROM sandbox_persist.event_log_entries'), '1', 'SH2.5 the event log is on the run''s shard');
SELECT is(pg_temp.on(0, 'SELECT count(*)::text FROM sandbox_persist.event_logs'), '0', 'SH2.6 and not on the other');
SELECT is(split_part(pg_temp.err($$SELECT sandbox_persist.event_log_append('run-b', '[{"type":"y"}]', '{"producerId":"7c9e6679-7425-40de-944b-e07fc1f90ae7","producerSeq":2,"fenceEpoch":3}')$$), '|', 1),
    'SP404', 'SH2.7 fenceEpoch is checked against the run on the same shard (SP404: the run has no epoch 3)');
SELECT sandbox_persist.run_update('run-b', '{"driverEpoch":3}');
SELECT is(sandbox_persist.event_log_append('run-b', '[{"type":"y"}]', '{"producerId":"7c9e6679-7425-40de-944b-e07fc1f90ae7","producerSeq":2,"fenceEpoch":3}')::text,
    '[2]', 'SH2.8 a matching fenceEpoch is accepted (the run is on the log''s shard)');
SELECT ok(sandbox_persist.lock_acquire('run-driver:run-b', 60000) IS NOT NULL, 'SH2.9 a run-driver lock through the router');
SELECT is(pg_temp.on(1, 'SELECT lock_key FROM sandbox_persist.locks'), 'run-driver:run-b', 'SH2.10 it is held on the run''s shard');
SELECT ok(sandbox_persist.lock_acquire('run-driver:', 60000) IS NOT NULL
          AND sandbox_persist.lock_acquire('run-driver:' || repeat('x', 1500), 60000) IS NOT NULL,
    'SH2.11 run-driver: keys whose run id no run can have are plain lock keys (no run look-up error)');

------------------------------------------------------------------------------
-- SH3: id-only reads find a record on either shard.
------------------------------------------------------------------------------
SELECT is(sandbox_persist.run_get('run-a') ->> 'threadId', :'t0', 'SH3.1 run_get finds a run on partition 0');
SELECT is(sandbox_persist.run_get('run-b') ->> 'threadId', :'t1', 'SH3.2 run_get finds a run on partition 1');
SELECT ok(sandbox_persist.run_get('run-none') IS NULL, 'SH3.3 an unknown run is NULL');
SELECT is(sandbox_persist.run_claim('run-b') ->> 'outcome', 'claimed', 'SH3.4 run_claim finds the run''s shard');
SELECT is(sandbox_persist.run_claim('run-none')::text, '{"outcome":"unknown"}', 'SH3.5 run_claim of an unknown run');
SELECT ok(sandbox_persist.run_update('run-a', '{"usage":{"n":1}}'), 'SH3.6 run_update reaches a run on partition 0');
SELECT ok(NOT sandbox_persist.run_update('run-none', '{"usage":{"n":1}}'), 'SH3.7 run_update of an unknown run is a no-op');
SELECT sandbox_persist.interrupt_create(json_build_object('interruptId', 'int-' || t, 'runId', 'run-x', 'threadId', t,
    'requestedAt', r, 'payload', '{}'::json))
FROM (VALUES (:'t0', 30), (:'t1', 10)) AS v(t, r);
SELECT is(sandbox_persist.interrupt_get('int-' || :'t1') ->> 'threadId', :'t1', 'SH3.8 interrupt_get finds an interrupt on partition 1');
SELECT ok(sandbox_persist.interrupt_resolve('int-' || :'t0', '"ok"'), 'SH3.9 interrupt_resolve reaches partition 0');
SELECT sandbox_persist.artifact_save(json_build_object('artifactId', 'art-' || t, 'runId', 'run-x', 'threadId', t,
    'name', 'n', 'mimeType', 'text/plain', 'size', 1, 'createdAt', c))
FROM (VALUES (:'t0', 5), (:'t1', 5)) AS v(t, c);
SELECT is(sandbox_persist.artifact_get('art-' || :'t0') ->> 'threadId', :'t0', 'SH3.10 artifact_get finds an artifact on partition 0');

------------------------------------------------------------------------------
-- SH4: lists across shards merge in contract order.
------------------------------------------------------------------------------
SELECT is((SELECT array_agg(e ->> 'interruptId' ORDER BY n) FROM json_array_elements(sandbox_persist.interrupt_list_by_run('run-x')) WITH ORDINALITY AS x(e, n)),
    ARRAY['int-' || :'t1', 'int-' || :'t0'], 'SH4.1 interrupt_list_by_run merges both shards by requestedAt');
SELECT is((SELECT array_agg(e ->> 'artifactId' ORDER BY n) FROM json_array_elements(sandbox_persist.artifact_list('run-x')) WITH ORDINALITY AS x(e, n)),
    (SELECT array_agg(a ORDER BY a COLLATE "C") FROM unnest(ARRAY['art-' || :'t0', 'art-' || :'t1']) AS a),
    'SH4.2 artifact_list merges both shards by createdAt, then id bytes');
SELECT is(sandbox_persist.artifact_delete_for_run('run-x'), 2, 'SH4.3 artifact_delete_for_run counts both shards');
SELECT sandbox_persist.run_update(r, json_build_object('detachedSince', s))
FROM (VALUES ('run-a', 300), ('run-b', 100)) AS v(r, s);
SELECT is((SELECT array_agg(e ->> 'runId' ORDER BY n) FROM json_array_elements(sandbox_persist.run_list_reclaimable(1000, 1)) WITH ORDINALITY AS x(e, n)),
    ARRAY['run-b', 'run-a'], 'SH4.4 run_list_reclaimable merges both shards by detachedSince');
SELECT sandbox_persist.blob_put(k, 'x') FROM (VALUES (shard_test.key_on('list/', 0)), (shard_test.key_on('list/', 1))) AS v(k);
SELECT is((SELECT array_agg(e ->> 'key' ORDER BY n) FROM json_array_elements(sandbox_persist.blob_list('list/') -> 'objects') WITH ORDINALITY AS x(e, n)),
    (SELECT array_agg(k ORDER BY k COLLATE "C") FROM unnest(ARRAY[shard_test.key_on('list/', 0), shard_test.key_on('list/', 1)]) AS k),
    'SH4.5 blob_list merges both shards in key byte order');
SELECT is(sandbox_persist.blob_list('list/', NULL, 1) ->> 'truncated', 'true', 'SH4.6 a page cut by the limit is truncated');
SELECT is(sandbox_persist.blob_list('list/', sandbox_persist.blob_list('list/', NULL, 1) ->> 'cursor', 5) -> 'objects' -> 0 ->> 'key',
    (SELECT max(k COLLATE "C") FROM unnest(ARRAY[shard_test.key_on('list/', 0), shard_test.key_on('list/', 1)]) AS k),
    'SH4.7 the cursor continues on the other shard''s key');

------------------------------------------------------------------------------
-- SH5: blobs where their references are; each shard's GC sees its own.
------------------------------------------------------------------------------
SELECT sandbox_persist.blob_put(:'ckey', 'shared bytes');
SELECT is(pg_temp.on(0, format('SELECT blob_key FROM sandbox_persist.blobs WHERE blob_key = %L', :'ckey'))
          || '/' || pg_temp.on(1, format('SELECT blob_key FROM sandbox_persist.blobs WHERE blob_key = %L', :'ckey')),
    :'ckey' || '/' || :'ckey', 'SH5.1 a content-addressed put is stored on both shards');
SELECT is(pg_temp.on(0, format('SELECT count(*)::text FROM sandbox_persist.blobs WHERE blob_key = %L', shard_test.key_on('list/', 1))),
    '0', 'SH5.2 a plain key is stored on its hash''s shard only');
SELECT sandbox_persist.checkpoint_acquire_writer(:'t0') AS w0, sandbox_persist.checkpoint_acquire_writer(:'t1') AS w1 \gset
SELECT sandbox_persist.checkpoint_append(pg_temp.cp_input('cp-' || :'t0', :'t0', :'ckey', NULL, :'w0'), '[]');
SELECT sandbox_persist.checkpoint_append(pg_temp.cp_input('cp-' || :'t1', :'t1', :'ckey', NULL, :'w1'), '[]');
SELECT is(sandbox_persist.checkpoint_list_blob_references()::text, format('[{"key":"%s","references":2}]', :'ckey'),
    'SH5.3 the router''s reference list sums both shards');
SELECT is(pg_temp.on(0, 'SELECT sandbox_persist.checkpoint_list_blob_references()::text'), format('[{"key":"%s","references":1}]', :'ckey'),
    'SH5.4 each shard counts only its own references');
SELECT ok(sandbox_persist.checkpoint_get('cp-' || :'t0') IS NOT NULL, 'SH5.5 checkpoint_get finds a checkpoint on partition 0');
SELECT ok(sandbox_persist.checkpoint_get('cp-' || :'t1') IS NOT NULL, 'SH5.6 ... and on partition 1');
SELECT sandbox_persist.checkpoint_delete_head(json_build_object('threadId', :'t0', 'checkpointId', 'cp-' || :'t0', 'writer', :'w0'::json));
SELECT (extract(epoch FROM clock_timestamp()) * 1000)::bigint + 3 * 86400000 AS later \gset
SELECT is(pg_temp.on(0, format('SELECT sandbox_persist.maintain(1000, %s) ->> ''blobsDeleted''', :'later')), '1',
    'SH5.7 partition 0 no longer references the key: its maintenance collects its copy');
SELECT is(pg_temp.on(1, format('SELECT sandbox_persist.maintain(1000, %s) ->> ''blobsDeleted''', :'later')), '0',
    'SH5.8 partition 1 still references it: its copy stays');
SELECT is((SELECT body FROM sandbox_persist.blob_get(:'ckey')), 'shared bytes'::bytea,
    'SH5.9 the router still reads the key (from the shard that keeps it)');

------------------------------------------------------------------------------
-- SH6: errors arrive as the shard raised them.
------------------------------------------------------------------------------
SELECT is(pg_temp.err($$SELECT sandbox_persist.run_get('')$$), '22023|run_id must not be empty|Identifiers are non-empty strings.',
    'SH6.1 a fan-out method''s error has the shard''s SQLSTATE, message and detail');
SELECT is(split_part(pg_temp.err(format('SELECT sandbox_persist.checkpoint_acquire_writer(%L)', :'t1')), '|', 1), 'SP005',
    'SH6.2 a one-shard method''s contract error keeps its SQLSTATE');
SELECT ok(strpos(pg_temp.err(format('SELECT sandbox_persist.checkpoint_acquire_writer(%L)', :'t1')), 'REMOTE') = 0,
    'SH6.3 no PL/Proxy prefix in the message or detail');

------------------------------------------------------------------------------
-- SH7: methods that touch several shards.
------------------------------------------------------------------------------
SELECT is(split_part(pg_temp.err(format($$SELECT sandbox_persist.interrupt_commit_batch('[{"interruptId":"int-%s","status":"cancelled"},{"interruptId":"int-%s","status":"cancelled"}]')$$, :'t0', :'t1')), '|', 1),
    '0A000', 'SH7.1 an interrupt batch over two shards is refused');
SELECT is(sandbox_persist.interrupt_get('int-' || :'t1') ->> 'status', 'pending', 'SH7.2 ... and changes nothing');
SELECT lives_ok(format($$SELECT sandbox_persist.interrupt_commit_batch('[{"interruptId":"int-%s","status":"cancelled"}]')$$, :'t1'),
    'SH7.3 a batch of one shard''s interrupts commits');
SELECT sandbox_persist.artifact_save(json_build_object('artifactId', 'art-move', 'runId', 'run-x', 'threadId', :'t0',
    'name', 'n', 'mimeType', 'text/plain', 'size', 1, 'createdAt', 1));
SELECT sandbox_persist.artifact_save(json_build_object('artifactId', 'art-move', 'runId', 'run-x', 'threadId', :'t1',
    'name', 'n', 'mimeType', 'text/plain', 'size', 1, 'createdAt', 1));
SELECT is(pg_temp.on(0, 'SELECT count(*)::text FROM sandbox_persist.artifacts WHERE artifact_id = ''art-move'''), '0',
    'SH7.4 re-saving an artifact under a thread of another shard moves it off the old shard');
SELECT is(sandbox_persist.artifact_get('art-move') ->> 'threadId', :'t1', 'SH7.5 ... onto the new thread''s shard');
SELECT sandbox_persist.lock_acquire(shard_test.key_on('lk/', 1), 60000);
SELECT sandbox_persist.lock_acquire(shard_test.key_on('lk/', 0), 60000);
SELECT is((sandbox_persist.lock_renew_many(json_build_array(
        json_build_object('key', shard_test.key_on('lk/', 1), 'ownerToken', 'wrong'),
        json_build_object('key', shard_test.key_on('lk/', 0), 'ownerToken', 'wrong'),
        json_build_object('key', 'lk/none', 'ownerToken', 'x')), 60000) -> 'lost')::jsonb,
    jsonb_build_array(shard_test.key_on('lk/', 1), shard_test.key_on('lk/', 0), 'lk/none'),
    'SH7.6 lock_renew_many over several shards answers in input order');

------------------------------------------------------------------------------
-- SH8: streamed uploads.
------------------------------------------------------------------------------
SELECT sandbox_persist.blob_upload_begin('sandbox-files/sha256/' || encode(sha256('streamed'), 'hex')) AS up \gset
SELECT ok(:'up' ~ '^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$', 'SH8.1 the router hands out the shard''s UUID');
SELECT sandbox_persist.blob_upload_append(:'up', 0, 'streamed');
SELECT is(sandbox_persist.blob_upload_commit(:'up') ->> 'size', '8', 'SH8.2 commit through the router');
SELECT is(pg_temp.on(0, format('SELECT count(*)::text FROM sandbox_persist.blobs WHERE blob_key = %L', 'sandbox-files/sha256/' || encode(sha256('streamed'), 'hex')))
          || pg_temp.on(1, format('SELECT count(*)::text FROM sandbox_persist.blobs WHERE blob_key = %L', 'sandbox-files/sha256/' || encode(sha256('streamed'), 'hex'))),
    '11', 'SH8.3 a committed content-addressed upload is copied to every shard');
SELECT is(split_part(pg_temp.err(format('SELECT sandbox_persist.blob_upload_append(%L, 0, ''x'')', :'up')), '|', 1), 'SP302',
    'SH8.4 the committed upload id is then unknown (SP302)');

------------------------------------------------------------------------------
-- SH9: fork on one shard; across shards the orchestration (or its stub).
------------------------------------------------------------------------------
SELECT shard_test.id_on('dest-', 1) AS d1, shard_test.id_on('dest-', 0) AS d0 \gset
SELECT is(sandbox_persist.checkpoint_fork_from_checkpoint(json_build_object(
        'sourceThreadId', :'t1', 'sourceCheckpointId', 'cp-' || :'t1', 'destinationThreadId', :'d1',
        'destinationCheckpointId', 'fork-1', 'createdAt', 5, 'writer', sandbox_persist.checkpoint_acquire_writer(:'d1'))) -> 'checkpoint' ->> 'threadId',
    :'d1', 'SH9.1 a fork between two threads of one shard runs there');
SELECT is(pg_temp.on(1, 'SELECT count(*)::text FROM sandbox_persist.checkpoints WHERE checkpoint_id = ''fork-1'''), '1', 'SH9.2 the fork root is on that shard');
SELECT CASE WHEN (SELECT prosrc FROM pg_proc WHERE oid = 'sandbox_persist._fork_across_shards(json,bigint)'::regprocedure) LIKE '%not installed%'
    THEN is(split_part(pg_temp.err(format($$SELECT sandbox_persist.checkpoint_fork_from_checkpoint(json_build_object(
        'sourceThreadId', %L, 'sourceCheckpointId', %L, 'destinationThreadId', %L,
        'destinationCheckpointId', 'fork-0', 'createdAt', 5, 'writer', sandbox_persist.checkpoint_acquire_writer(%L)))$$,
        :'t1', 'cp-' || :'t1', :'d0', :'d0')), '|', 1), '0A000', 'SH9.3 without router/cross_shard.sql a cross-shard fork is 0A000')
    ELSE pass('SH9.3 router/cross_shard.sql is installed (its own suite tests cross-shard forks)') END;

------------------------------------------------------------------------------
-- SH10: maintenance and reset reach every shard.
------------------------------------------------------------------------------
SELECT is((SELECT count(*) FROM json_object_keys(sandbox_persist.maintain())), 15::bigint, 'SH10.1 maintain() answers every count');
SELECT sandbox_persist._reset_for_tests();
SELECT is(pg_temp.on(0, 'SELECT count(*)::text FROM sandbox_persist.runs') || pg_temp.on(1, 'SELECT count(*)::text FROM sandbox_persist.runs'),
    '00', 'SH10.2 _reset_for_tests() empties every shard');
SELECT is((SELECT count(*) FROM sandbox_persist.run_thread_cache), 0::bigint, 'SH10.3 ... and the router''s run cache');

------------------------------------------------------------------------------
-- SH11: the router's functions are not PUBLIC's; grant_app_role grants them.
------------------------------------------------------------------------------
CREATE ROLE sh_app;
SET ROLE sh_app;
SELECT is(split_part(pg_temp.err(format('SELECT sandbox_persist.message_load_thread(%L)', :'t0')), '|', 1), '42501',
    'SH11.1 a role without the grant cannot call the router');
RESET ROLE;
SELECT sandbox_persist.grant_app_role('sh_app');
SET ROLE sh_app;
SELECT is(sandbox_persist.message_load_thread(:'t0')::text, '[]', 'SH11.2 after grant_app_role it can (a one-shard call)');
SELECT ok(sandbox_persist.run_create_or_resume('{"runId":"sh-run","threadId":"sh-t","startedAt":1}') IS NOT NULL
          AND sandbox_persist.event_log_append('sh-run', '[{"t":1}]')::text = '[1]',
    'SH11.3 ... and a call that fills the run cache');
RESET ROLE;
SELECT ok(NOT has_function_privilege('sh_app', 'sandbox_persist.grant_app_role(regrole)', 'EXECUTE')
          AND NOT has_function_privilege('sh_app', 'sandbox_persist._reset_for_tests()', 'EXECUTE'),
    'SH11.4 the administration routines are not granted');
SELECT sandbox_persist.revoke_app_role('sh_app');
SELECT ok(NOT has_schema_privilege('sh_app', 'sandbox_persist', 'USAGE')
          AND NOT has_function_privilege('sh_app', format('sandbox_persist.message_load_thread(text)'), 'EXECUTE'),
    'SH11.5 revoke_app_role withdraws the schema and the functions');
SELECT lives_ok('DROP ROLE sh_app', 'SH11.6 after which the role can be dropped');

------------------------------------------------------------------------------
-- SH12: durable streams by path; a fork on its source's shard (a pin when its
-- path hashes elsewhere); run-logs/<run_id> with the run.
------------------------------------------------------------------------------
SELECT sandbox_persist._reset_for_tests();
SELECT shard_test.key_on('st-src/', 0) AS ssrc, shard_test.key_on('st-fork/', 1) AS sfork,
       shard_test.key_on('st-home/', 1) AS shome, shard_test.key_on('st-fork0/', 0) AS sfork0,
       shard_test.key_on('st-plain/', 1) AS splain \gset
CREATE FUNCTION pg_temp.stream_on(part integer, p text) RETURNS text LANGUAGE sql AS $$
    SELECT pg_temp.on(part, format('SELECT count(*)::text FROM sandbox_persist.streams WHERE path = %L', p))
$$;
CREATE FUNCTION pg_temp.fork_of(src text) RETURNS json LANGUAGE sql AS $$
    SELECT json_build_object('forkedFrom', src)
$$;
SELECT is(sandbox_persist.stream_create(:'splain', 'text/plain', NULL, 'p') ->> 'created', 'true', 'SH12.1 a create through the router');
SELECT is(pg_temp.stream_on(1, :'splain') || pg_temp.stream_on(0, :'splain'), '10',
    'SH12.2 a stream is stored on the shard of hashtext(path) only');
SELECT is(encode((SELECT body FROM sandbox_persist.stream_read(:'splain')), 'escape'), 'p', 'SH12.3 ... and read from there');
SELECT sandbox_persist.stream_create(:'ssrc', 'text/plain', NULL, 'abc');
SELECT is(sandbox_persist.stream_create(:'sfork', 'text/plain', pg_temp.fork_of(:'ssrc')) ->> 'created', 'true',
    'SH12.4 a fork whose path hashes to the other shard is created');
SELECT is(pg_temp.stream_on(0, :'sfork') || pg_temp.stream_on(1, :'sfork'), '10', 'SH12.5 ... on its source''s shard');
SELECT is((SELECT shard FROM sandbox_persist.stream_placement WHERE path = :'sfork'), 0, 'SH12.6 ... its path pinned there');
SELECT is(encode((SELECT body FROM sandbox_persist.stream_read(:'sfork')), 'escape'), 'abc',
    'SH12.7 the fork is read through the router (its source''s entries)');
SELECT is(sandbox_persist.stream_append(:'sfork', 'text/plain', 'def') ->> 'outcome', 'appended', 'SH12.8 appended through the router');
SELECT is(encode((SELECT body FROM sandbox_persist.stream_read(:'sfork')), 'escape'), 'abcdef', 'SH12.9 ... and read back');
SELECT is(sandbox_persist.stream_head(:'sfork') ->> 'nextOffset', '0000000000000000_0000000000000002', 'SH12.10 head through the router');
SELECT is(encode((SELECT body FROM sandbox_persist.stream_read(:'ssrc')), 'escape'), 'abc', 'SH12.11 the source is unchanged');
SELECT is(sandbox_persist.stream_create(:'sfork', 'text/plain', pg_temp.fork_of(:'ssrc')) ->> 'created', 'false',
    'SH12.12 the same fork create again is created: false (the pinned shard answers)');
SELECT is((SELECT count(*) FROM sandbox_persist.stream_placement), 1::bigint, 'SH12.13 one pin, created once');
SELECT is(sandbox_persist.stream_delete(:'ssrc')::text, '{"softDeleted":true}',
    'SH12.14 the source is soft-deleted (its fork on the same shard reads through it)');
SELECT is(sandbox_persist.stream_delete(:'sfork')::text, '{"softDeleted":false}', 'SH12.15 the fork is deleted through the router');
SELECT is(pg_temp.on(0, 'SELECT count(*)::text FROM sandbox_persist.streams WHERE path IS NOT NULL'), '0',
    'SH12.16 ... which frees its source too (the cascade ran on their shard)');
SELECT is(split_part(pg_temp.err(format('SELECT sandbox_persist.stream_read(%L)', :'sfork')), '|', 1), 'SP701',
    'SH12.17 a read of the deleted fork is SP701');
SELECT is((SELECT shard FROM sandbox_persist.stream_placement WHERE path = :'sfork'), 0, 'SH12.18 the pin is kept after the delete');
SELECT sandbox_persist.stream_create(:'sfork', 'text/plain', NULL, 'again');
SELECT is(pg_temp.stream_on(0, :'sfork') || pg_temp.stream_on(1, :'sfork'), '10',
    'SH12.19 a later plain create at the pinned path goes to the pinned shard');
-- A fork at a path already taken on its home shard: the create goes there
-- and the shard answers; nothing is pinned.
SELECT sandbox_persist.stream_create(:'ssrc', 'text/plain', NULL, 'abc');
SELECT sandbox_persist.stream_create(:'shome', 'text/plain', NULL, 'xyz');
SELECT is(split_part(pg_temp.err(format('SELECT sandbox_persist.stream_create(%L, ''text/plain'', %L)', :'shome', pg_temp.fork_of(:'ssrc'))), '|', 1),
    'SP703', 'SH12.20 a fork create at a path taken on its home shard is answered there (409)');
SELECT is(sandbox_persist.stream_create(:'shome', 'text/plain', NULL, 'xyz') ->> 'created', 'false',
    'SH12.21 ... and the identical create is created: false there (200)');
SELECT is((SELECT count(*) FROM sandbox_persist.stream_placement WHERE path = :'shome'), 0::bigint, 'SH12.22 ... with no pin');
SELECT is(pg_temp.stream_on(0, :'shome') || pg_temp.stream_on(1, :'shome'), '01', 'SH12.23 ... and no copy on the source''s shard');
SELECT is(split_part(pg_temp.err(format('SELECT sandbox_persist.stream_create(%L, ''text/plain'', %L)', shard_test.key_on('st-none/', 1), pg_temp.fork_of(:'ssrc' || '-none'))), '|', 1),
    'SP701', 'SH12.24 a fork of a missing source is SP701');
SELECT is((SELECT count(*) FROM sandbox_persist.stream_placement WHERE path <> :'sfork'), 0::bigint, 'SH12.25 ... and pins nothing');
SELECT is(sandbox_persist.stream_create(:'sfork0', 'text/plain', pg_temp.fork_of(:'ssrc')) ->> 'created', 'true',
    'SH12.26 a fork whose path hashes to its source''s shard is created there');
SELECT is(pg_temp.stream_on(0, :'sfork0') || '/' || (SELECT count(*) FROM sandbox_persist.stream_placement WHERE path = :'sfork0'),
    '1/0', 'SH12.27 ... without a pin');
-- run-logs/<run_id>: the run's event log, on the run's shard (not the hash of the path or run id).
SELECT shard_test.key_on('st-run-', 0) AS srun \gset
SELECT sandbox_persist.run_create_or_resume(json_build_object('runId', :'srun', 'threadId', :'t1', 'startedAt', 1));
SELECT sandbox_persist.event_log_append(:'srun', '[{"type":"a"}]');
SELECT is(sandbox_persist._partition(sandbox_persist._shard_of_stream('run-logs/' || :'srun')), 1,
    'SH12.28 run-logs/<run_id> goes to the run''s shard (the run id hashes to the other)');
SELECT is(encode((SELECT body FROM sandbox_persist.stream_read('run-logs/' || :'srun')), 'escape'), '[{"type":"a"}]',
    'SH12.29 a run''s log is read at run-logs/<run_id> through the router');
SELECT is(sandbox_persist.stream_head('run-logs/' || :'srun') ->> 'streamId', 'eventLog:' || (sandbox_persist.event_log_read(:'srun', 0, 0) ->> 'logId'),
    'SH12.30 ... and headed');
SELECT is(split_part(pg_temp.err(format('SELECT sandbox_persist.stream_append(%L, ''application/json'', ''[1]'')', 'run-logs/' || :'srun')), '|', 1)
          || split_part(pg_temp.err(format('SELECT sandbox_persist.stream_delete(%L)', 'run-logs/' || :'srun')), '|', 1)
          || split_part(pg_temp.err(format('SELECT sandbox_persist.stream_create(%L, ''application/json'')', 'run-logs/' || :'srun')), '|', 1),
    'SP703SP703SP703', 'SH12.31 writes at run-logs/ are refused by the run''s shard');
SELECT is(split_part(pg_temp.err(format('SELECT sandbox_persist.stream_create(%L, ''text/plain'', %L)', :'splain' || 'x', pg_temp.fork_of('run-logs/' || :'srun'))), '|', 1),
    'SP703', 'SH12.32 a fork of a run-logs/ path is refused');
SELECT sandbox_persist._reset_for_tests();
SELECT is((SELECT count(*) FROM sandbox_persist.stream_placement), 0::bigint, 'SH12.33 _reset_for_tests() empties the stream pins');

SELECT * FROM finish();
ROLLBACK;
