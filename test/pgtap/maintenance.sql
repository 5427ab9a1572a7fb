-- pgTAP: maintenance (docs/contract/maintenance.md, README.md §5).
-- Cases: M1-M14, M16-M20, M23, the SQL part of M22 (the pg_cron run itself
-- and the "no pg_cron here" branch are in zz_cron.sql and zz_nocron.sql),
-- and the overview view. (M15 is NODE; M21, X5 and X16 are isolation specs.)
--
-- Clocks: maintain(), blob and lock calls take an injected now_ms; run rows
-- and event logs carry server-clock times that no call can inject. Cases
-- that need those to be "old" either pass maintain() a now_ms far after the
-- real clock, or set the relevant idle setting to 1 s and split the rows in
-- time: the old ones written, pg_sleep(0.6), the clock read (:x_recent), the
-- recent ones written, then maintain(1000, :x_recent + 500). The old rows are
-- then at least 1.1 s idle and the recent ones at most 0.5 s, however long a
-- busy machine stalls between statements (a sleep is only ever longer).
--
-- Run with: pg_prove -d <db> test/pgtap/maintenance.sql
-- (needs sandbox_persist.allow_test_reset and allow_client_clock on, and
-- pg_cron installed in the database for M22).
BEGIN;
SELECT plan(159);
SELECT sandbox_persist._reset_for_tests();
SET LOCAL sandbox_persist.allow_client_clock = on;

------------------------------------------------------------------------------
-- Helpers (temporary, gone at ROLLBACK).
------------------------------------------------------------------------------

-- The wall clock in epoch milliseconds (what the server stamps).
CREATE FUNCTION pg_temp.now_ms() RETURNS bigint LANGUAGE sql AS $$
    SELECT (extract(epoch FROM clock_timestamp()) * 1000)::bigint
$$;

-- Every row of every data table of the extension except maintenance's own
-- bookkeeping (maintenance_state, and attention unless asked for), all
-- columns, in a fixed order: equal values mean nothing changed.
CREATE FUNCTION pg_temp.db_state(with_attention boolean DEFAULT false) RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
    t regclass;
    part text;
    acc text := '';
BEGIN
    FOR t IN
        SELECT c.oid::regclass FROM pg_extension e, unnest(e.extconfig) AS x(oid)
        JOIN pg_class c ON c.oid = x.oid
        WHERE e.extname = 'sandbox_persist' AND c.relkind = 'r'
          AND c.relname <> 'maintenance_state'
          AND (with_attention OR c.relname <> 'attention')
        ORDER BY c.relname
    LOOP
        EXECUTE format($q$SELECT %L || ':' || count(*) || E'\n' ||
                              coalesce(string_agg(x::text, E'\n' ORDER BY x::text), '')
                         FROM %s x$q$, t::text, t) INTO part;
        acc := acc || part || E'\n';
    END LOOP;
    RETURN acc;
END
$$;

-- The rows of one table, all columns, in a fixed order.
CREATE FUNCTION pg_temp.rows_of(tbl text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    r text;
BEGIN
    EXECUTE format($q$SELECT count(*) || E'\n' || coalesce(string_agg(x::text, E'\n' ORDER BY x::text), '')
                     FROM sandbox_persist.%I x$q$, tbl) INTO r;
    RETURN r;
END
$$;

-- The state a refused call must leave unchanged (every table the suite reads).
CREATE FUNCTION pg_temp.state() RETURNS text LANGUAGE sql AS $$
    SELECT pg_temp.db_state(true)
$$;

\ir lib/durable_helpers.psql

-- The maintain() answer with every count zero.
CREATE FUNCTION pg_temp.zeros() RETURNS jsonb LANGUAGE sql AS $$
    SELECT '{"blobsDeleted":0,"uploadsRemoved":0,"locksPurged":0,"logsClosed":0,"logsProducerLost":0,
             "logsDeleted":0,"runsDeleted":0,"detachedRuns":0,"dueRuns":0,"attentionNew":0,"attentionResolved":0,
             "conversationPositionsDeleted":0,"conversationMessagesDeleted":0,"blobsRecompressed":0,"streamsPurged":0}'::jsonb
$$;
-- zeros() with some counts replaced.
CREATE FUNCTION pg_temp.counts(j jsonb) RETURNS jsonb LANGUAGE sql AS $$
    SELECT pg_temp.zeros() || j
$$;

-- Content-addressed key of some bytes ('files' or 'artifacts').
CREATE FUNCTION pg_temp.ca(body bytea, kind text DEFAULT 'files') RETURNS text LANGUAGE sql AS $$
    SELECT 'sandbox-' || kind || '/sha256/' || encode(sha256(body), 'hex')
$$;
-- Put a content-addressed blob of the given bytes at now_ms; returns its key.
CREATE FUNCTION pg_temp.put_ca(body bytea, now_ms bigint, kind text DEFAULT 'files') RETURNS text
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM sandbox_persist.blob_put(pg_temp.ca(body, kind), body, NULL, now_ms);
    RETURN pg_temp.ca(body, kind);
END
$$;
CREATE FUNCTION pg_temp.blob_exists(k text) RETURNS boolean LANGUAGE sql AS $$
    SELECT EXISTS (SELECT 1 FROM sandbox_persist.blobs WHERE blob_key = k)
$$;
CREATE FUNCTION pg_temp.blob_version(k text) RETURNS bigint LANGUAGE sql AS $$
    SELECT version FROM sandbox_persist.blobs WHERE blob_key = k
$$;
CREATE FUNCTION pg_temp.chunks_of(v bigint) RETURNS bigint LANGUAGE sql AS $$
    SELECT count(*) FROM sandbox_persist.blob_chunks WHERE version = v
$$;

-- A running run, optionally patched.
CREATE FUNCTION pg_temp.run(id text, patch json DEFAULT NULL, status text DEFAULT 'running') RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM sandbox_persist.run_create_or_resume(json_build_object(
        'runId', id, 'threadId', 'thread-' || id, 'startedAt', 1, 'status', status));
    IF patch IS NOT NULL THEN
        PERFORM sandbox_persist.run_update(id, patch);
    END IF;
END
$$;
CREATE FUNCTION pg_temp.run_exists(id text) RETURNS boolean LANGUAGE sql AS $$
    SELECT EXISTS (SELECT 1 FROM sandbox_persist.runs WHERE run_id = id)
$$;
CREATE FUNCTION pg_temp.log_closed(run text) RETURNS boolean LANGUAGE sql AS $$
    SELECT closed_at IS NOT NULL FROM sandbox_persist.event_logs WHERE run_id = run
$$;
CREATE FUNCTION pg_temp.log_exists(run text) RETURNS boolean LANGUAGE sql AS $$
    SELECT EXISTS (SELECT 1 FROM sandbox_persist.event_logs WHERE run_id = run)
$$;
CREATE FUNCTION pg_temp.instance(k text, updated bigint, latest_run text DEFAULT NULL) RETURNS void
LANGUAGE sql AS $$
    SELECT sandbox_persist.instance_upsert(json_strip_nulls(json_build_object(
        'key', k, 'provider', 'fake', 'providerSandboxId', 'sb-' || k, 'threadId', 'thread-' || k,
        'latestRunId', latest_run, 'updatedAt', updated)))
$$;

-- Watchdog items of a kind, as sorted "runId" values ('' for none).
CREATE FUNCTION pg_temp.items(kind text) RETURNS text[] LANGUAGE sql AS $$
    SELECT coalesce(array_agg(coalesce(e->>'runId', '') ORDER BY coalesce(e->>'runId', '')), '{}')
    FROM json_array_elements(sandbox_persist.attention_list()) e WHERE e->>'kind' = items.kind
$$;
CREATE FUNCTION pg_temp.item(kind text, run text) RETURNS jsonb LANGUAGE sql AS $$
    SELECT e::jsonb FROM json_array_elements(sandbox_persist.attention_list()) e
    WHERE e->>'kind' = item.kind AND coalesce(e->>'runId', '') = run
$$;

-- A checkpoint input whose one file references blob key k.
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

\set h '3600000::bigint'
\set d '86400000::bigint'

------------------------------------------------------------------------------
-- M1: nothing to do changes nothing.
------------------------------------------------------------------------------
SELECT pg_temp.db_state(true) AS m1_before \gset
SELECT is(sandbox_persist.maintain()::jsonb, pg_temp.zeros(), 'M1.1 maintain() on an empty database returns zero counts');
SELECT is(pg_temp.db_state(true), :'m1_before', 'M1.2 and changes no data table (attention included)');
SELECT is(sandbox_persist.maintain()::jsonb, pg_temp.zeros(), 'M1.3 a second call likewise returns zero counts');
SELECT is(pg_temp.db_state(true), :'m1_before', 'M1.4 and changes nothing');
SELECT is(sandbox_persist.maintain(1000, pg_temp.now_ms() + 3650 * :d)::jsonb, pg_temp.zeros(),
    'M1.5 an empty database has nothing to do ten years from now either');
SELECT is(s.keys, ARRAY['blobsDeleted', 'uploadsRemoved', 'locksPurged', 'logsClosed', 'logsProducerLost',
        'logsDeleted', 'runsDeleted', 'detachedRuns', 'dueRuns', 'attentionNew', 'attentionResolved',
        'conversationPositionsDeleted', 'conversationMessagesDeleted', 'blobsRecompressed', 'streamsPurged'],
    'M1.6 the answer has exactly the fifteen count keys (A11 adds conversationPositionsDeleted and conversationMessagesDeleted, A12 blobsRecompressed, A13 streamsPurged)')
  FROM (SELECT array_agg(k ORDER BY n) AS keys
          FROM json_object_keys(sandbox_persist.maintain()) WITH ORDINALITY AS t(k, n)) s;
-- A database with only fresh state: nothing is eligible.
SELECT pg_temp.now_ms() AS r \gset
SELECT pg_temp.put_ca('m1 fresh', :r);
SELECT sandbox_persist.blob_upload_begin('m1/upload', NULL, :r);
SELECT sandbox_persist.lock_acquire('m1-lock', 60000, :r);
SELECT pg_temp.run('m1-run');
SELECT sandbox_persist.event_log_append('m1-run', '[{"i":1}]');
SELECT sandbox_persist.event_log_append('m1-chat', '[{"i":1}]');
SELECT sandbox_persist.event_log_close('m1-chat');
SELECT pg_temp.db_state(true) AS m1_fresh \gset
SELECT is(sandbox_persist.maintain(1000, :r)::jsonb, pg_temp.zeros(),
    'M1.7 with only fresh blobs, uploads, locks, runs and logs every count is zero');
SELECT is(pg_temp.db_state(true), :'m1_fresh', 'M1.8 and nothing changed');
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.maintain(-1)$$, '22023', 'M1.9 maintain(max_rows -1)');
SELECT is(sandbox_persist.maintain(NULL, :r)::jsonb, pg_temp.zeros(),
    'M1.10 maintain(max_rows NULL) is maintain() (the row-limit rule; it was 22004 before 0.3.0)');
SELECT is(pg_temp.db_state(true), :'m1_fresh', 'M1.10 maintain(max_rows NULL): and nothing changed');

------------------------------------------------------------------------------
-- M2: an unreferenced content-addressed blob past the grace is deleted.
------------------------------------------------------------------------------
SELECT sandbox_persist._reset_for_tests();
SET LOCAL sandbox_persist.blob_chunk_size = '4kB';
SELECT pg_temp.now_ms() AS r \gset
SELECT pg_temp.put_ca(decode(repeat(md5('m2'), 320), 'hex'), :r - 25 * :h) AS m2_files,
       pg_temp.put_ca('m2 artifact bytes', :r - 48 * :h, 'artifacts') AS m2_art \gset
SELECT pg_temp.blob_version(:'m2_files') AS m2_v1, pg_temp.blob_version(:'m2_art') AS m2_v2 \gset
SELECT cmp_ok(pg_temp.chunks_of(:m2_v1), '>=', 2::bigint, 'M2.1 the files blob is stored in several chunks');
SELECT is(sandbox_persist.maintain(1000, :r)::jsonb, pg_temp.counts('{"blobsDeleted":2}'),
    'M2.2 maintain deletes both unreferenced content-addressed blobs (files and artifacts) past the 24 h grace');
SELECT ok(NOT pg_temp.blob_exists(:'m2_files') AND NOT pg_temp.blob_exists(:'m2_art'), 'M2.3 both blobs are gone');
SELECT is(pg_temp.chunks_of(:m2_v1) + pg_temp.chunks_of(:m2_v2), 0::bigint, 'M2.4 with all their chunks');
SELECT is((SELECT count(*) FROM sandbox_persist.blob_chunks), 0::bigint, 'M2.5 no chunk row is left behind');
SELECT ok(sandbox_persist.blob_head(:'m2_files', :r) IS NULL, 'M2.6 head of the deleted key is NULL');

------------------------------------------------------------------------------
-- M3: a blob put or head-ed within the grace is kept.
------------------------------------------------------------------------------
SELECT sandbox_persist._reset_for_tests();
SELECT pg_temp.now_ms() AS r \gset
SELECT pg_temp.put_ca('m3 recent put', :r - 23 * :h) AS m3_put,
       pg_temp.put_ca('m3 old put, recent head', :r - 48 * :h) AS m3_head,
       pg_temp.put_ca('m3 old put, head 23 h ago', :r - 48 * :h) AS m3_head23,
       pg_temp.put_ca('m3 old, untouched', :r - 48 * :h) AS m3_old \gset
SELECT sandbox_persist.blob_head(:'m3_head', :r - :h);
SELECT sandbox_persist.blob_head(:'m3_head23', :r - 23 * :h);
SELECT is(sandbox_persist.maintain(1000, :r)::jsonb, pg_temp.counts('{"blobsDeleted":1}'),
    'M3.1 only the untouched old blob is deleted');
SELECT ok(pg_temp.blob_exists(:'m3_put'), 'M3.2 a blob put 23 h ago (within the 24 h grace) is kept');
SELECT ok(pg_temp.blob_exists(:'m3_head'), 'M3.3 an old blob head-ed 1 h ago is kept');
SELECT ok(pg_temp.blob_exists(:'m3_head23'), 'M3.4 an old blob head-ed 23 h ago is kept');
SELECT ok(NOT pg_temp.blob_exists(:'m3_old'), 'M3.5 the old untouched blob is gone');
SET LOCAL sandbox_persist.blob_gc_grace = '2h';
SELECT is((sandbox_persist.maintain(1000, :r)->>'blobsDeleted')::int, 2,
    'M3.6 with blob_gc_grace 2h the blobs relied on 23 h ago become collectable');
SELECT ok(pg_temp.blob_exists(:'m3_head') AND NOT pg_temp.blob_exists(:'m3_put') AND NOT pg_temp.blob_exists(:'m3_head23'),
    'M3.7 the blob head-ed 1 h ago is still within the 2 h grace');
RESET sandbox_persist.blob_gc_grace;

------------------------------------------------------------------------------
-- M4: a blob referenced by a checkpoint is never deleted.
------------------------------------------------------------------------------
SELECT sandbox_persist._reset_for_tests();
SELECT pg_temp.now_ms() AS r \gset
SELECT pg_temp.put_ca('m4 referenced', :r - 48 * :h) AS m4_key \gset
SELECT sandbox_persist.checkpoint_acquire_writer('m4-thread', 600000) AS m4_writer \gset
SELECT sandbox_persist.checkpoint_append(pg_temp.cp_input('m4-cp', 'm4-thread', :'m4_key', NULL, :'m4_writer'),
                                         '[]');
SELECT is(sandbox_persist.maintain(1000, :r)::jsonb, pg_temp.zeros(), 'M4.1 maintain deletes nothing');
SELECT is((sandbox_persist.maintain(1000, :r + 3650 * :d)->>'blobsDeleted')::int, 0,
    'M4.2 not even ten years later');
SELECT ok(pg_temp.blob_exists(:'m4_key'), 'M4.3 the referenced blob is still there');
SELECT is(sandbox_persist.checkpoint_list_blob_references()::jsonb,
    jsonb_build_array(jsonb_build_object('key', :'m4_key', 'references', 1)), 'M4.4 its reference is intact');
SELECT sandbox_persist.checkpoint_delete_head(json_build_object('threadId', 'm4-thread', 'checkpointId', 'm4-cp',
                                              'writer', :'m4_writer'::json));
SELECT is((sandbox_persist.maintain(1000, :r)->>'blobsDeleted')::int, 1,
    'M4.5 once the checkpoint is deleted the old blob is collected');

------------------------------------------------------------------------------
-- M5: keys outside the content-addressed patterns are never deleted.
------------------------------------------------------------------------------
SELECT sandbox_persist._reset_for_tests();
-- M5.3 counts chunk rows, so these small objects are stored in chunks (GC of
-- inline objects: blob_inline.sql).
SET LOCAL sandbox_persist.blob_inline_max = 0;
SELECT pg_temp.now_ms() AS r \gset
SELECT sandbox_persist.blob_put(k, convert_to('m5', 'UTF8'), NULL, :r - 48 * :h)
FROM unnest(ARRAY[
    'artifacts/r/a',
    'app/key',
    'sandbox-files/sha256/' || upper(encode(sha256('m5'), 'hex')),
    'sandbox-files/sha256/' || left(encode(sha256('m5'), 'hex'), 63),
    'sandbox-files/sha256/' || encode(sha256('m5'), 'hex') || '0',
    'sandbox-files/sha256/' || encode(sha256('m5'), 'hex') || '/x',
    'x/sandbox-files/sha256/' || encode(sha256('m5'), 'hex'),
    'sandbox-other/sha256/' || encode(sha256('m5'), 'hex'),
    'sandbox-files/sha512/' || encode(sha256('m5'), 'hex'),
    'artifacts/sandbox-artifacts/sha256/' || encode(sha256('m5'), 'hex')]) AS k;
SELECT pg_temp.rows_of('blobs') AS m5_blobs \gset
SELECT is((sandbox_persist.maintain(1000, :r + 3650 * :d)->>'blobsDeleted')::int, 0,
    'M5.1 no blob outside ^sandbox-(files|artifacts)/sha256/[0-9a-f]{64}$ is deleted, however old');
SELECT is(pg_temp.rows_of('blobs'), :'m5_blobs', 'M5.2 all ten look-alike and application keys are unchanged');
SELECT is((SELECT count(*) FROM sandbox_persist.blob_chunks), 10::bigint, 'M5.3 their chunks are all there');
RESET sandbox_persist.blob_inline_max;

------------------------------------------------------------------------------
-- M6: a blob referenced only by an artifact-store record is kept.
------------------------------------------------------------------------------
SELECT sandbox_persist._reset_for_tests();
SELECT pg_temp.now_ms() AS r \gset
SELECT pg_temp.put_ca('m6 artifact', :r - 48 * :h, 'artifacts') AS m6_key,
       pg_temp.put_ca('m6 file', :r - 48 * :h) AS m6_key2 \gset
SELECT sandbox_persist.artifact_save(json_build_object('artifactId', 'm6-a', 'runId', 'm6-run', 'threadId', 'm6-t',
    'blobKey', :'m6_key', 'name', 'a.png', 'mimeType', 'image/png', 'size', 11, 'createdAt', 1));
SELECT sandbox_persist.artifact_save(json_build_object('artifactId', 'm6-b', 'runId', 'm6-run', 'threadId', 'm6-t',
    'blobKey', :'m6_key2', 'name', 'b.txt', 'mimeType', 'text/plain', 'size', 7, 'createdAt', 2));
SELECT is((sandbox_persist.maintain(1000, :r + 3650 * :d)->>'blobsDeleted')::int, 0,
    'M6.1 blobs named by artifact records are not deleted');
SELECT ok(pg_temp.blob_exists(:'m6_key') AND pg_temp.blob_exists(:'m6_key2'), 'M6.2 both blobs are kept');
SELECT sandbox_persist.artifact_delete('m6-a');
SELECT is((sandbox_persist.maintain(1000, :r)->>'blobsDeleted')::int, 1,
    'M6.3 once its artifact record is deleted the blob is collected');
SELECT ok(NOT pg_temp.blob_exists(:'m6_key') AND pg_temp.blob_exists(:'m6_key2'), 'M6.4 only that blob went');

------------------------------------------------------------------------------
-- M7: abandoned uploads are removed; recent ones kept.
------------------------------------------------------------------------------
SELECT sandbox_persist._reset_for_tests();
SET LOCAL sandbox_persist.blob_chunk_size = '4kB';
SELECT pg_temp.now_ms() AS r \gset
SELECT sandbox_persist.blob_upload_begin('m7/old', NULL, :r - 48 * :h) AS m7_old,
       sandbox_persist.blob_upload_begin('m7/idle', NULL, :r - 48 * :h) AS m7_idle,
       sandbox_persist.blob_upload_begin('m7/recent', NULL, :r - 48 * :h) AS m7_recent \gset
SELECT sandbox_persist.blob_upload_append(:'m7_old', 0, decode(repeat('ab', 9000), 'hex'), :r - 25 * :h);
SELECT sandbox_persist.blob_upload_append(:'m7_recent', 0, decode(repeat('cd', 9000), 'hex'), :r - :h);
SELECT (SELECT version FROM sandbox_persist.blob_uploads WHERE upload_id = :'m7_old'::uuid) AS m7_old_v \gset
SELECT cmp_ok(pg_temp.chunks_of(:m7_old_v), '>=', 1::bigint, 'M7.1 the old upload has staged chunks');
SELECT is(sandbox_persist.maintain(1000, :r)::jsonb, pg_temp.counts('{"uploadsRemoved":2}'),
    'M7.2 the two uploads idle past 24 h are removed');
SELECT is(pg_temp.chunks_of(:m7_old_v), 0::bigint, 'M7.3 with their staged chunks');
SELECT * FROM pg_temp.rejects(format($$SELECT sandbox_persist.blob_upload_append(%L, 9000, '\x00', %s)$$, :'m7_old', :r),
    'SP302 BLOB_UPLOAD_NOT_FOUND', 'M7.4 appending to a removed upload');
SELECT * FROM pg_temp.rejects(format($$SELECT sandbox_persist.blob_upload_commit(%L, %s)$$, :'m7_idle', :r),
    'SP302 BLOB_UPLOAD_NOT_FOUND', 'M7.5 committing a removed upload');
SELECT is(sandbox_persist.blob_upload_append(:'m7_recent', 9000, '\x01', :r)::jsonb, '{"received":9001}'::jsonb,
    'M7.6 the upload touched 1 h ago was kept and takes more bytes');
SELECT is((sandbox_persist.blob_upload_commit(:'m7_recent', :r)->>'size')::int, 9001, 'M7.7 and commits');
SELECT ok(NOT pg_temp.blob_exists('m7/old') AND NOT pg_temp.blob_exists('m7/idle'),
    'M7.8 removed uploads never published an object');
SELECT sandbox_persist.blob_upload_begin('m7/short', NULL, :r - 2 * :h) AS m7_short \gset
SET LOCAL sandbox_persist.upload_expiry = '1h';
SELECT is((sandbox_persist.maintain(1000, :r)->>'uploadsRemoved')::int, 1,
    'M7.9 with upload_expiry 1h an upload idle 2 h is removed');
RESET sandbox_persist.upload_expiry;

------------------------------------------------------------------------------
-- M8: long-expired lock rows are purged; fences keep growing.
------------------------------------------------------------------------------
SELECT sandbox_persist._reset_for_tests();
SELECT pg_temp.now_ms() AS r \gset
SELECT sandbox_persist.lock_acquire('m8-old', 1000, :r - 3 * :h);                -- expired ~3 h ago
SELECT sandbox_persist.lock_acquire('m8-old2', 1000, :r - :h - 1001);             -- expired 1 h + 1 ms ago
SELECT sandbox_persist.lock_acquire('m8-boundary', 1000, :r - :h - 1000);         -- expired exactly 1 h ago
SELECT sandbox_persist.lock_acquire('m8-recent', 1000, :r - 30 * 60000);          -- expired 30 min ago
SELECT sandbox_persist.lock_acquire('m8-live', 600000, :r);                       -- live
SELECT max(fence) AS m8_max_fence FROM sandbox_persist.locks \gset
SELECT is(sandbox_persist.maintain(1000, :r)::jsonb, pg_temp.counts('{"locksPurged":2}'),
    'M8.1 the two rows expired longer than lock_purge_after (1 h) are purged');
SELECT is((SELECT array_agg(lock_key ORDER BY lock_key) FROM sandbox_persist.locks),
    ARRAY['m8-boundary', 'm8-live', 'm8-recent'],
    'M8.2 the live row, the recently expired row and the row expired exactly 1 h ago stay');
SELECT cmp_ok((sandbox_persist.lock_acquire('m8-old', 1000, :r)->>'fence')::bigint, '>', :m8_max_fence::bigint,
    'M8.3 re-acquiring a purged key gets a fence larger than every earlier one');
SET LOCAL sandbox_persist.lock_purge_after = 0;
SELECT is((sandbox_persist.maintain(1000, :r)->>'locksPurged')::int, 2,
    'M8.4 with lock_purge_after 0 every expired row is purged');
SELECT is((SELECT array_agg(lock_key ORDER BY lock_key) FROM sandbox_persist.locks), ARRAY['m8-live', 'm8-old'],
    'M8.5 live rows are never purged');
RESET sandbox_persist.lock_purge_after;

------------------------------------------------------------------------------
-- M9: checkpoint thread rows are never deleted; fences continue.
------------------------------------------------------------------------------
SELECT sandbox_persist._reset_for_tests();
SELECT pg_temp.now_ms() AS r \gset
SELECT sandbox_persist.checkpoint_release_writer(sandbox_persist.checkpoint_acquire_writer('m9-released', 1000, :r - 48 * :h));
SELECT sandbox_persist.checkpoint_acquire_writer('m9-expired', 1000, :r - 48 * :h);
SELECT pg_temp.rows_of('checkpoint_threads') AS m9_threads \gset
SELECT is(sandbox_persist.maintain(1000, :r + 3650 * :d)::jsonb, pg_temp.zeros(), 'M9.1 maintain has nothing to do');
SELECT is(pg_temp.rows_of('checkpoint_threads'), :'m9_threads', 'M9.2 the checkpoint thread rows are untouched');
SELECT is((sandbox_persist.checkpoint_acquire_writer('m9-released', 1000, :r)->>'fence')::int, 2,
    'M9.3 a new acquire on the released thread gets the previous fence + 1');
SELECT is((sandbox_persist.checkpoint_acquire_writer('m9-expired', 1000, :r)->>'fence')::int, 2,
    'M9.4 a takeover of the expired lease gets the previous fence + 1');

------------------------------------------------------------------------------
-- M10: closed logs past retention are deleted whole; open logs never.
-- (event_log_idle_close off: these open logs stand for live producers; M24
-- covers the logs that rule ends.)
------------------------------------------------------------------------------
SELECT sandbox_persist._reset_for_tests();
SET LOCAL sandbox_persist.event_log_idle_close = 0;
SELECT pg_temp.now_ms() AS r \gset
SELECT sandbox_persist.event_log_append('m10-closed', '[{"i":1},{"i":2}]',
    '{"producerId":"10101010-2222-4333-8444-555555555555","producerSeq":1}');
SELECT sandbox_persist.event_log_close('m10-closed');
SELECT sandbox_persist.event_log_append('m10-open', '[{"i":1}]');
SELECT pg_temp.run('m10-running');
SELECT sandbox_persist.event_log_append('m10-running', '[{"i":1}]');
SELECT (SELECT log_id FROM sandbox_persist.event_logs WHERE run_id = 'm10-closed') AS m10_id \gset
SELECT is((sandbox_persist.maintain(1000, :r + 29 * :d)->>'logsDeleted')::int, 0,
    'M10.1 a log closed 29 days ago is kept (retention 30 days)');
SELECT is(sandbox_persist.maintain(1000, :r + 31 * :d)::jsonb, pg_temp.counts('{"logsDeleted":1}'),
    'M10.2 a log closed 31 days ago is deleted');
SELECT ok(NOT pg_temp.log_exists('m10-closed'), 'M10.3 its log row is gone');
SELECT is((SELECT count(*) FROM sandbox_persist.event_log_entries WHERE log_id = :m10_id)
        + (SELECT count(*) FROM sandbox_persist.event_log_producers WHERE log_id = :m10_id), 0::bigint,
    'M10.4 with all its entries and producer ledger rows (whole)');
SELECT is(sandbox_persist.event_log_read('m10-closed', 0)->>'exists', 'false', 'M10.5 it reads as unknown');
SELECT ok(pg_temp.log_exists('m10-open') AND pg_temp.log_exists('m10-running'), 'M10.6 open logs are kept');
SELECT is((sandbox_persist.maintain(1000, :r + 3650 * :d)->>'logsDeleted')::int, 0,
    'M10.7 open logs are never deleted, at any age');
SELECT is(sandbox_persist.event_log_snapshot('m10-open')::text, '[{"seq":1,"chunk":{"i":1}}]',
    'M10.8 and keep their entries');
SELECT sandbox_persist.event_log_close('m10-open');
SET LOCAL sandbox_persist.event_log_retention = 0;
SELECT is((sandbox_persist.maintain(1000, :r + 3650 * :d)->>'logsDeleted')::int, 0,
    'M10.9 with event_log_retention 0 no closed log is deleted');
SELECT ok(pg_temp.log_exists('m10-open'), 'M10.10 the closed log is kept');
RESET sandbox_persist.event_log_retention;
RESET sandbox_persist.event_log_idle_close;

------------------------------------------------------------------------------
-- M11: open logs of terminal runs idle past the grace are closed.
------------------------------------------------------------------------------
SELECT sandbox_persist._reset_for_tests();
SET LOCAL sandbox_persist.event_log_close_grace = '1s';
SELECT pg_temp.run('m11-completed'), pg_temp.run('m11-failed'), pg_temp.run('m11-aborted', NULL, 'aborted'),
       pg_temp.run('m11-running'), pg_temp.run('m11-interrupted', NULL, 'interrupted'),
       pg_temp.run('m11-recent-append'), pg_temp.run('m11-recent-row');
SELECT sandbox_persist.run_update('m11-completed', '{"status":"completed","finishedAt":2}'),
       sandbox_persist.run_update('m11-failed', '{"status":"failed","error":{"message":"x"}}'),
       sandbox_persist.run_update('m11-recent-append', '{"status":"completed"}'),
       sandbox_persist.run_update('m11-recent-row', '{"status":"completed"}');
SELECT sandbox_persist.event_log_append(id, '[{"i":1}]')
FROM unnest(ARRAY['m11-completed', 'm11-failed', 'm11-aborted', 'm11-running', 'm11-interrupted',
                  'm11-recent-append', 'm11-recent-row', 'm11-no-run']) AS id;
SELECT pg_sleep(0.6);
SELECT pg_temp.now_ms() AS m11_recent \gset
SELECT sandbox_persist.event_log_append('m11-recent-append', '[{"i":2}]');
SELECT sandbox_persist.run_update('m11-recent-row', '{"usage":{"tokens":1}}');
SELECT is(sandbox_persist.maintain(1000, :m11_recent + 500)::jsonb, pg_temp.counts('{"logsClosed":3}'),
    'M11.1 three logs of terminal runs idle past event_log_close_grace are closed');
SELECT ok(pg_temp.log_closed('m11-completed') AND pg_temp.log_closed('m11-failed') AND pg_temp.log_closed('m11-aborted'),
    'M11.2 the logs of the completed, failed and aborted runs are closed');
SELECT ok(NOT pg_temp.log_closed('m11-running'), 'M11.3 the log of a running run is not closed');
SELECT ok(NOT pg_temp.log_closed('m11-interrupted'), 'M11.4 the log of an interrupted run is not closed');
SELECT ok(NOT pg_temp.log_closed('m11-recent-append'), 'M11.5 a terminal run''s log with a recent append is not closed');
SELECT ok(NOT pg_temp.log_closed('m11-recent-row'), 'M11.6 a terminal run whose row changed recently keeps its log open');
SELECT ok(NOT pg_temp.log_closed('m11-no-run'), 'M11.7 a log without a run record is not closed');
SELECT is(sandbox_persist.event_log_read('m11-completed', 0)->>'tail', '1', 'M11.8 closing kept the entries');
SELECT is((SELECT appends_after_close FROM sandbox_persist.event_logs WHERE run_id = 'm11-completed'), 0::bigint,
    'M11.9 closing by maintenance is not an append after close');
RESET sandbox_persist.event_log_close_grace;
SELECT is((sandbox_persist.maintain(1000, pg_temp.now_ms() + 5 * 60000)->>'logsClosed')::int, 0,
    'M11.10 with the default 10 min grace the remaining terminal logs, 5 min idle, stay open');
SELECT is((sandbox_persist.maintain(1000, pg_temp.now_ms() + 11 * 60000)->>'logsClosed')::int, 2,
    'M11.11 and are closed once 11 min idle');

------------------------------------------------------------------------------
-- M12: run retention.
------------------------------------------------------------------------------
SELECT sandbox_persist._reset_for_tests();
SELECT pg_temp.run('m12-completed', '{"status":"completed","finishedAt":2}'),
       pg_temp.run('m12-aborted', NULL, 'aborted'),
       pg_temp.run('m12-latest', '{"status":"failed"}'),
       pg_temp.run('m12-sandbox', '{"status":"completed","sandboxKey":"m12-inst-sb"}'),
       pg_temp.run('m12-running'), pg_temp.run('m12-interrupted', NULL, 'interrupted'),
       pg_temp.run('m12-detached', '{"detachedSince":1,"sandboxKey":"gone"}'),
       pg_temp.run('m12-recent');
SELECT pg_temp.instance('m12-inst-latest', 1, 'm12-latest'), pg_temp.instance('m12-inst-sb', 1);
SELECT pg_temp.rows_of('runs') AS m12_runs \gset
SELECT is((sandbox_persist.maintain(1000, pg_temp.now_ms() + 3650 * :d)->>'runsDeleted')::int, 0,
    'M12.1 with run_retention 0 (the default) no run is deleted, however old');
SELECT is(pg_temp.rows_of('runs'), :'m12_runs', 'M12.2 every run row is unchanged');
SET LOCAL sandbox_persist.run_retention = '1s';
SELECT pg_sleep(0.6);
SELECT pg_temp.now_ms() AS m12_recent \gset
SELECT sandbox_persist.run_update('m12-recent', '{"status":"completed"}');
SELECT is((sandbox_persist.maintain(1000, :m12_recent + 500)->>'runsDeleted')::int, 2,
    'M12.3 with run_retention 1s two terminal runs are deleted');
SELECT ok(NOT pg_temp.run_exists('m12-completed') AND NOT pg_temp.run_exists('m12-aborted'),
    'M12.4 the unreferenced completed and aborted runs idle past the retention are gone');
SELECT ok(pg_temp.run_exists('m12-latest'), 'M12.5 a terminal run that an instance row names as latestRunId is kept');
SELECT ok(pg_temp.run_exists('m12-sandbox'), 'M12.6 a terminal run whose sandboxKey is an instance row''s key is kept');
SELECT ok(pg_temp.run_exists('m12-running') AND pg_temp.run_exists('m12-interrupted') AND pg_temp.run_exists('m12-detached'),
    'M12.7 running, interrupted and detached runs are never deleted');
SELECT ok(pg_temp.run_exists('m12-recent'), 'M12.8 a run that became terminal recently is kept');
SELECT is((sandbox_persist.maintain(1000, pg_temp.now_ms() + 3650 * :d)->>'runsDeleted')::int, 1,
    'M12.9 later only the recent terminal run is added');
SELECT ok(pg_temp.run_exists('m12-running') AND pg_temp.run_exists('m12-interrupted') AND pg_temp.run_exists('m12-latest')
          AND pg_temp.run_exists('m12-sandbox') AND NOT pg_temp.run_exists('m12-recent'),
    'M12.10 non-terminal and referenced runs survive even ten years on');
RESET sandbox_persist.run_retention;

------------------------------------------------------------------------------
-- M13: maintenance never changes a run.
------------------------------------------------------------------------------
SELECT sandbox_persist._reset_for_tests();
SELECT pg_temp.now_ms() AS r \gset
SELECT pg_temp.run('m13-detached-1', json_build_object('detachedSince', :r - 30 * :d, 'sandboxKey', 'sb-1', 'driverEpoch', 3)),
       pg_temp.run('m13-detached-2', json_build_object('detachedSince', :r - 2 * :h, 'sandboxKey', 'sb-2', 'cancelRequested', false)),
       pg_temp.run('m13-stuck-cancel', '{"cancelRequested":true,"driverEpoch":1}'),
       pg_temp.run('m13-detached-cancel', json_build_object('cancelRequested', true, 'detachedSince', :r - 5 * :d, 'sandboxKey', 'sb-3')),
       pg_temp.run('m13-invisible'),
       pg_temp.run('m13-invisible-epoch', '{"driverEpoch":9,"sandboxKey":"sb-9"}'),
       pg_temp.run('m13-interrupted', '{"detachedSince":5}', 'interrupted'),
       pg_temp.run('m13-done', '{"status":"completed","finishedAt":7,"cancelRequested":true,"detachedSince":6,"sandboxKey":"sb-d","driverEpoch":4}');
SELECT sandbox_persist.event_log_append('m13-invisible', '[{"i":1}]');
SELECT sandbox_persist.event_log_close('m13-invisible');
SELECT sandbox_persist.event_log_append('m13-invisible', '[{"i":2}]');
SELECT pg_temp.rows_of('runs') AS m13_runs \gset
SELECT string_agg(sandbox_persist.run_get(run_id)::text, E'\n' ORDER BY run_id) AS m13_gets
FROM sandbox_persist.runs \gset
SET LOCAL sandbox_persist.reaper_ttl = '1h';
SET LOCAL sandbox_persist.reaper_sweep_interval = '1min';
SELECT cmp_ok((sandbox_persist.maintain(1000, :r + :d)->>'attentionNew')::int, '>=', 5,
    'M13.1 a day on, maintain reports the detached, stuck and invisible runs as attention items');
SELECT sandbox_persist.maintain(1000, :r + 30 * :d);
SET LOCAL sandbox_persist.watchdog_idle = 1;
SELECT sandbox_persist.maintain(1000, :r + 365 * :d);
SELECT is(pg_temp.rows_of('runs'), :'m13_runs',
    'M13.2 after three calls no run row changed: status, finishedAt, cancelRequested, detachedSince, driverEpoch, sandboxKey, change time');
SELECT is((SELECT string_agg(sandbox_persist.run_get(run_id)::text, E'\n' ORDER BY run_id) FROM sandbox_persist.runs),
    :'m13_gets', 'M13.3 every run reads back exactly as before');
SELECT is(sandbox_persist.run_list_reclaimable(:r + 365 * :d, 0)::jsonb -> 0 ->> 'runId', 'm13-detached-1',
    'M13.4 the detached runs are still reclaimable (oldest first)');
RESET sandbox_persist.reaper_ttl;
RESET sandbox_persist.reaper_sweep_interval;
RESET sandbox_persist.watchdog_idle;

------------------------------------------------------------------------------
-- M14: instance rows are never deleted; gc candidates.
------------------------------------------------------------------------------
SELECT sandbox_persist._reset_for_tests();
SELECT pg_temp.now_ms() AS r \gset
SELECT pg_temp.run('m14-running'), pg_temp.run('m14-interrupted', NULL, 'interrupted'),
       pg_temp.run('m14-done', '{"status":"completed"}'),
       pg_temp.run('m14-sb-running', '{"sandboxKey":"i-sandbox-running"}'),
       pg_temp.run('m14-sb-done', '{"status":"failed","sandboxKey":"i-sandbox-done"}');
SELECT pg_temp.instance('i-free', :r - 10 * :h),
       pg_temp.instance('i-latest-done', :r - 9 * :h, 'm14-done'),
       pg_temp.instance('i-latest-running', :r - 8 * :h, 'm14-running'),
       pg_temp.instance('i-latest-interrupted', :r - 8 * :h, 'm14-interrupted'),
       pg_temp.instance('i-latest-missing', :r - 7 * :h, 'm14-never-existed'),
       pg_temp.instance('i-sandbox-running', :r - 6 * :h),
       pg_temp.instance('i-sandbox-done', :r - 5 * :h),
       pg_temp.instance('i-locked', :r - 4 * :h),
       pg_temp.instance('i-lock-expired', :r - 3 * :h),
       pg_temp.instance('i-other-lock', :r - 2 * :h),
       pg_temp.instance('i-boundary', :r - :h),
       pg_temp.instance('i-new', :r - 1000);
SELECT sandbox_persist.lock_acquire('sandbox:i-locked', 60000, :r);
SELECT sandbox_persist.lock_acquire('sandbox:i-lock-expired', 1000, :r - 60000);
SELECT sandbox_persist.lock_acquire('run-driver:i-other-lock', 60000, :r);
SELECT sandbox_persist.lock_acquire('sandbox:i-other-lock-x', 60000, :r);
SELECT pg_temp.rows_of('instances') AS m14_instances \gset
SELECT is((SELECT array_agg(e->>'key' ORDER BY n)
             FROM json_array_elements(sandbox_persist.instance_gc_candidates(:h, 100, :r)) WITH ORDINALITY AS t(e, n)),
    ARRAY['i-free', 'i-latest-done', 'i-latest-missing', 'i-sandbox-done', 'i-lock-expired', 'i-other-lock'],
    'M14.1 candidates: older than the retention, no non-terminal run referencing them, no live sandbox: lock (oldest first)');
SELECT is((sandbox_persist.instance_gc_candidates(:h, 100, :r) -> 1)::jsonb,
    sandbox_persist.instance_get('i-latest-done')::jsonb, 'M14.2 each candidate is the full instance record');
SELECT is((SELECT array_agg(e->>'key' ORDER BY n)
             FROM json_array_elements(sandbox_persist.instance_gc_candidates(:h, 2, :r)) WITH ORDINALITY AS t(e, n)),
    ARRAY['i-free', 'i-latest-done'], 'M14.3 max_rows bounds the list to the oldest two');
SELECT is(sandbox_persist.instance_gc_candidates(11 * :h, 100, :r)::text, '[]',
    'M14.4 with an 11 h retention there are no candidates');
SELECT is(pg_temp.rows_of('instances'), :'m14_instances', 'M14.5 listing candidates deleted nothing');
SET LOCAL sandbox_persist.run_retention = '1s';
SELECT sandbox_persist.maintain(1000, :r + 3650 * :d);
SELECT sandbox_persist.maintain(1000, :r + 3650 * :d);
SELECT is(pg_temp.rows_of('instances'), :'m14_instances', 'M14.6 maintain() deletes no instance row, even ten years on');
RESET sandbox_persist.run_retention;

------------------------------------------------------------------------------
-- M16: reaper_missing.
------------------------------------------------------------------------------
SELECT sandbox_persist._reset_for_tests();
SELECT pg_temp.now_ms() AS r \gset
SET LOCAL sandbox_persist.reaper_ttl = 60;
SET LOCAL sandbox_persist.reaper_sweep_interval = 30;
SELECT pg_temp.run('m16-old', json_build_object('detachedSince', :r - 120001)),
       pg_temp.run('m16-boundary', json_build_object('detachedSince', :r - 120000)),
       pg_temp.run('m16-young', json_build_object('detachedSince', :r - 10000)),
       pg_temp.run('m16-done', json_build_object('status', 'completed', 'detachedSince', :r - 999999));
SELECT is(sandbox_persist.maintain(1000, :r)::jsonb,
    pg_temp.counts('{"detachedRuns":3,"dueRuns":2,"attentionNew":2}'),
    'M16.1 two new items; three running detached runs, two of them at or past reaper_ttl');
SELECT is(pg_temp.items('reaper_missing'), ARRAY['', 'm16-old'],
    'M16.2 reaper_missing for the run detached longer than ttl + 2 x interval, and one for the missing heartbeat');
SELECT is(pg_temp.item('reaper_missing', 'm16-old') - 'detail',
    jsonb_build_object('kind', 'reaper_missing', 'runId', 'm16-old', 'firstSeen', :r, 'lastSeen', :r),
    'M16.3 the run item has kind, runId, firstSeen and lastSeen');
SELECT ok(NOT pg_temp.item('reaper_missing', '') ? 'runId', 'M16.4 the heartbeat item names no run');
SELECT sandbox_persist.reaper_heartbeat('replica-a', '{"reaped":0}', :r + 1000);
SELECT is(sandbox_persist.maintain(1000, :r + 1000)::jsonb,
    pg_temp.counts('{"detachedRuns":3,"dueRuns":2,"attentionNew":1,"attentionResolved":1}'),
    'M16.5 after a heartbeat: the heartbeat item is resolved; the boundary run now crosses the limit');
SELECT is(pg_temp.items('reaper_missing'), ARRAY['m16-boundary', 'm16-old'], 'M16.6 only the run items remain');
SELECT is(pg_temp.item('reaper_missing', 'm16-old') - 'detail',
    jsonb_build_object('kind', 'reaper_missing', 'runId', 'm16-old', 'firstSeen', :r, 'lastSeen', :r + 1000),
    'M16.7 a standing item keeps firstSeen and advances lastSeen');
SELECT sandbox_persist.run_update('m16-old', '{"detachedSince":null}');
SELECT is(sandbox_persist.maintain(1000, :r + 2000)::jsonb,
    pg_temp.counts('{"detachedRuns":2,"dueRuns":1,"attentionResolved":1}'),
    'M16.8 the re-attached run''s item is resolved');
SELECT is(pg_temp.items('reaper_missing'), ARRAY['m16-boundary'], 'M16.9 only the boundary run''s item remains');
SELECT is((sandbox_persist.maintain(1000, :r + 1000 + 60001)->>'attentionNew')::int, 1,
    'M16.10 no heartbeat within 2 x interval while runs are detached -> a new heartbeat item');
SELECT is(pg_temp.items('reaper_missing'), ARRAY['', 'm16-boundary'], 'M16.11 the heartbeat item is back');
SET LOCAL sandbox_persist.reaper_sweep_interval = 0;
SELECT is((sandbox_persist.maintain(1000, :r + 70000)->>'attentionResolved')::int, 2,
    'M16.12 with reaper_sweep_interval 0 (unknown) neither rule applies and both items resolve');
SELECT is(pg_temp.items('reaper_missing'), '{}'::text[], 'M16.13 no reaper_missing item is left');
RESET sandbox_persist.reaper_ttl;
RESET sandbox_persist.reaper_sweep_interval;

------------------------------------------------------------------------------
-- M17: invisible_run.
------------------------------------------------------------------------------
SELECT sandbox_persist._reset_for_tests();
SET LOCAL sandbox_persist.watchdog_idle = 1;
SELECT pg_temp.now_ms() AS r \gset
SELECT pg_temp.run('v-plain'), pg_temp.run('v-lock-live'), pg_temp.run('v-lock-expired'),
       pg_temp.run('v-lock-other-key'), pg_temp.run('v-log-old'), pg_temp.run('v-log-recent'),
       pg_temp.run('v-row-recent'), pg_temp.run('v-detached', '{"detachedSince":1}'),
       pg_temp.run('v-done', '{"status":"completed"}'), pg_temp.run('v-interrupted', NULL, 'interrupted');
SELECT sandbox_persist.lock_acquire('run-driver:v-lock-live', 600000);
SELECT sandbox_persist.lock_acquire('run-driver:v-lock-expired', 1000, :r - 100000);
SELECT sandbox_persist.lock_acquire('sandbox:v-lock-other-key', 600000);
SELECT sandbox_persist.event_log_append('v-log-old', '[{"i":1}]');
SELECT sandbox_persist.event_log_append('v-log-recent', '[{"i":1}]');
SELECT pg_sleep(0.6);
SELECT pg_temp.now_ms() AS m17_recent \gset
SELECT sandbox_persist.event_log_append('v-log-recent', '[{"i":2}]');
SELECT sandbox_persist.run_update('v-row-recent', '{"usage":{"n":1}}');
SELECT is((sandbox_persist.maintain(1000, :m17_recent + 500)->>'attentionNew')::int, 4, 'M17.1 four new attention items');
SELECT is(pg_temp.items('invisible_run'), ARRAY['v-lock-expired', 'v-lock-other-key', 'v-log-old', 'v-plain'],
    'M17.2 invisible_run: running, not detached, no live run-driver lock, no recent append or row change');
SELECT ok(pg_temp.item('invisible_run', 'v-plain') ->> 'firstSeen' IS NOT NULL, 'M17.3 the item carries firstSeen');
SELECT sandbox_persist.lock_acquire('run-driver:v-plain', 600000);
SELECT sandbox_persist.event_log_append('v-log-old', '[{"i":2}]');
-- A recheck looks only at items last seen before this call's millisecond (the
-- ones this very call records are fresh): the injected clock moves on first.
SELECT is((sandbox_persist.maintain(1000, :m17_recent + 510)->>'attentionResolved')::int, 2,
    'M17.4 a live lock and a fresh append resolve two items');
SELECT is(pg_temp.items('invisible_run'), ARRAY['v-lock-expired', 'v-lock-other-key'], 'M17.5 the other two remain');
RESET sandbox_persist.watchdog_idle;
SELECT is((sandbox_persist.maintain(1000, :m17_recent + 520)->>'attentionResolved')::int, 2,
    'M17.6 with the default 10 min watchdog_idle runs idle for a second are not invisible');

------------------------------------------------------------------------------
-- M18: stuck_cancel.
------------------------------------------------------------------------------
SELECT sandbox_persist._reset_for_tests();
SET LOCAL sandbox_persist.watchdog_idle = 1;
SELECT pg_temp.run('c-stuck', '{"cancelRequested":true}'),
       pg_temp.run('c-stuck-detached', '{"cancelRequested":true,"detachedSince":1}'),
       pg_temp.run('c-recent'),
       pg_temp.run('c-false', '{"cancelRequested":false}'),
       pg_temp.run('c-done', '{"cancelRequested":true,"status":"aborted"}'),
       pg_temp.run('c-interrupted', '{"cancelRequested":true}', 'interrupted');
SELECT pg_sleep(0.6);
SELECT pg_temp.now_ms() AS m18_recent \gset
SELECT sandbox_persist.run_update('c-recent', '{"cancelRequested":true}');
SELECT pg_temp.now_ms() AS m18_after \gset
SELECT sandbox_persist.maintain(1000, :m18_recent + 500);
SELECT is(pg_temp.items('stuck_cancel'), ARRAY['c-stuck', 'c-stuck-detached'],
    'M18.1 stuck_cancel: running runs whose cancel request is older than watchdog_idle');
SELECT ok(pg_temp.run_exists('c-stuck') AND (sandbox_persist.run_get('c-stuck')->>'status') = 'running',
    'M18.2 the stuck run is only reported, still running');
-- 1.1 s after the recent cancel was written (by the injected clock).
SELECT sandbox_persist.maintain(1000, :m18_after + 1100);
SELECT is(pg_temp.items('stuck_cancel'), ARRAY['c-recent', 'c-stuck', 'c-stuck-detached'],
    'M18.3 a second later the recent cancel is reported too');
RESET sandbox_persist.watchdog_idle;

------------------------------------------------------------------------------
-- M19: append_after_close.
------------------------------------------------------------------------------
SELECT sandbox_persist._reset_for_tests();
SELECT pg_temp.now_ms() AS r \gset
SELECT sandbox_persist.event_log_append('m19-late', '[{"i":1}]');
SELECT sandbox_persist.event_log_close('m19-late');
SELECT sandbox_persist.event_log_append('m19-late', '[{"i":2}]');
SELECT sandbox_persist.event_log_append('m19-closed', '[{"i":1}]');
SELECT sandbox_persist.event_log_close('m19-closed');
SELECT sandbox_persist.event_log_append('m19-open', '[{"i":1}]');
SELECT is(sandbox_persist.maintain(1000, :r)::jsonb, pg_temp.counts('{"attentionNew":1}'), 'M19.1 one new item');
SELECT is(sandbox_persist.attention_list()::jsonb,
    jsonb_build_array(jsonb_build_object('kind', 'append_after_close', 'runId', 'm19-late', 'firstSeen', :r,
                                         'lastSeen', :r, 'detail', jsonb_build_object('appendsAfterClose', 1))),
    'M19.2 append_after_close for the log appended after close, with the count as detail');
SELECT sandbox_persist.event_log_append('m19-late', '[{"i":3}]');
SELECT is(sandbox_persist.maintain(1000, :r + 1000)::jsonb, pg_temp.zeros(), 'M19.3 a standing item is not new again');
SELECT is(sandbox_persist.attention_list()::jsonb,
    jsonb_build_array(jsonb_build_object('kind', 'append_after_close', 'runId', 'm19-late', 'firstSeen', :r,
                                         'lastSeen', :r + 1000, 'detail', jsonb_build_object('appendsAfterClose', 2))),
    'M19.4 it keeps firstSeen and reports the new count');

------------------------------------------------------------------------------
-- M20: max_rows bounds every action; repeated calls converge.
------------------------------------------------------------------------------
SELECT sandbox_persist._reset_for_tests();
SELECT pg_temp.now_ms() AS r \gset
SELECT :r + 40 * :d AS n \gset
SELECT pg_temp.put_ca(convert_to('m20 blob ' || i, 'UTF8'), :n - 48 * :h) FROM generate_series(1, 5) i;
SELECT sandbox_persist.blob_upload_begin('m20/upload-' || i, NULL, :n - 48 * :h) FROM generate_series(1, 5) i;
SELECT sandbox_persist.lock_acquire('m20-lock-' || i, 1000, :n - 48 * :h) FROM generate_series(1, 5) i;
SELECT pg_temp.run('m20-done-' || i, '{"status":"completed"}') FROM generate_series(1, 5) i;
SELECT sandbox_persist.event_log_append('m20-done-' || i, '[{"i":1}]') FROM generate_series(1, 5) i;
SELECT sandbox_persist.event_log_append('m20-chat-' || i, '[{"i":1}]') FROM generate_series(1, 5) i;
SELECT sandbox_persist.event_log_close('m20-chat-' || i) FROM generate_series(1, 5) i;
SELECT pg_temp.run('m20-invisible-' || i) FROM generate_series(1, 5) i;
CREATE TEMP TABLE m20_calls (call int PRIMARY KEY, answer jsonb);
INSERT INTO m20_calls SELECT 1, sandbox_persist.maintain(2, :n)::jsonb;
INSERT INTO m20_calls SELECT 2, sandbox_persist.maintain(2, :n)::jsonb;
INSERT INTO m20_calls SELECT 3, sandbox_persist.maintain(2, :n)::jsonb;
INSERT INTO m20_calls SELECT 4, sandbox_persist.maintain(2, :n)::jsonb;
SELECT is((SELECT answer FROM m20_calls WHERE call = 1),
    pg_temp.counts('{"blobsDeleted":2,"uploadsRemoved":2,"locksPurged":2,"logsClosed":2,"logsDeleted":2,"attentionNew":2}'),
    'M20.1 the first call with max_rows 2 handles exactly 2 rows of each action');
SELECT is((SELECT array_agg(k ORDER BY k) FROM m20_calls, jsonb_each_text(answer) AS e(k, v)
            WHERE v::int > 2 AND k NOT IN ('detachedRuns', 'dueRuns')), NULL::text[],
    'M20.2 no call handled more than 2 rows of any action');
SELECT is((SELECT jsonb_object_agg(k, s) FROM (
             SELECT k, sum(v::int) AS s FROM m20_calls, jsonb_each_text(answer) AS e(k, v)
              WHERE k IN ('blobsDeleted', 'uploadsRemoved', 'locksPurged', 'logsClosed', 'logsDeleted')
              GROUP BY k) t),
    '{"blobsDeleted":5,"uploadsRemoved":5,"locksPurged":5,"logsClosed":5,"logsDeleted":5}'::jsonb,
    'M20.3 repeated calls handle all five rows of every destructive action, each once');
SELECT is((SELECT answer FROM m20_calls WHERE call = 4) - 'attentionNew' - 'attentionResolved',
    pg_temp.zeros() - 'attentionNew' - 'attentionResolved', 'M20.4 the fourth call finds nothing left to delete or close');
SELECT ok(NOT EXISTS (SELECT 1 FROM sandbox_persist.blobs) AND NOT EXISTS (SELECT 1 FROM sandbox_persist.blob_uploads)
          AND NOT EXISTS (SELECT 1 FROM sandbox_persist.locks)
          AND NOT EXISTS (SELECT 1 FROM sandbox_persist.event_logs WHERE run_id LIKE 'm20-chat-%')
          AND NOT EXISTS (SELECT 1 FROM sandbox_persist.event_logs WHERE closed_at IS NULL),
    'M20.5 the converged state equals one unbounded call''s');
SELECT is(pg_temp.items('invisible_run'),
    ARRAY['m20-invisible-1', 'm20-invisible-2', 'm20-invisible-3', 'm20-invisible-4', 'm20-invisible-5'],
    'M20.6 repeated bounded calls record all five watchdog items');
SELECT sandbox_persist.maintain(1000, :n);
SELECT is((sandbox_persist.maintain(2, :n + 1000)->>'attentionResolved')::int, 0,
    'M20.7 a bounded call does not resolve standing items it did not get to');
SELECT is(cardinality(pg_temp.items('invisible_run')), 5, 'M20.8 all five items are still listed');
-- Run retention, on its own.
SELECT sandbox_persist._reset_for_tests();
SET LOCAL sandbox_persist.run_retention = '1d';
SELECT pg_temp.run('m20-old-' || i, '{"status":"completed"}') FROM generate_series(1, 5) i;
SELECT pg_temp.now_ms() + 40 * :d AS n \gset
SELECT is(ARRAY[(sandbox_persist.maintain(2, :n)->>'runsDeleted')::int, (sandbox_persist.maintain(2, :n)->>'runsDeleted')::int,
                (sandbox_persist.maintain(2, :n)->>'runsDeleted')::int, (sandbox_persist.maintain(2, :n)->>'runsDeleted')::int],
    ARRAY[2, 2, 1, 0], 'M20.9 run retention deletes 2, 2, 1, then 0 runs with max_rows 2');
SELECT ok(NOT EXISTS (SELECT 1 FROM sandbox_persist.runs), 'M20.10 all five old terminal runs are gone');
RESET sandbox_persist.run_retention;

------------------------------------------------------------------------------
-- M23: maintenance leaves the chat and checkpoint stores byte-identical.
------------------------------------------------------------------------------
SELECT sandbox_persist._reset_for_tests();
SELECT pg_temp.now_ms() AS r \gset
SELECT sandbox_persist.message_save_thread('m23-thread',
    '[{"role":"user","content":"hi\u0000","b":1,"a":2,"a":3},{"role":"assistant","content":"\ud800"}]');
SELECT pg_temp.put_ca('m23 file', :r - 48 * :h) AS m23_key,
       pg_temp.put_ca('m23 artifact', :r - 48 * :h, 'artifacts') AS m23_art \gset
SELECT sandbox_persist.checkpoint_acquire_writer('m23-thread', 600000) AS m23_writer \gset
SELECT sandbox_persist.checkpoint_append(pg_temp.cp_input('m23-cp1', 'm23-thread', :'m23_key', NULL, :'m23_writer'),
    '[{"role":"user","content":"x"}]');
SELECT sandbox_persist.checkpoint_append(pg_temp.cp_input('m23-cp2', 'm23-thread', :'m23_key', 'm23-cp1', :'m23_writer'),
    '[{"role":"user","content":"x"},{"role":"assistant","content":"y"}]');
SELECT pg_temp.run('m23-run', '{"status":"completed","finishedAt":9}');
SELECT sandbox_persist.interrupt_create('{"interruptId":"m23-i1","runId":"m23-run","threadId":"m23-thread","requestedAt":5,"payload":{"q":"?"}}');
SELECT sandbox_persist.interrupt_create('{"interruptId":"m23-i2","runId":"m23-run","threadId":"m23-thread","requestedAt":6,"payload":{}}');
SELECT sandbox_persist.interrupt_resolve('m23-i2', '{"answer":42}', 7);
SELECT sandbox_persist.metadata_set('m23-ns', 'm23-key', '{"v":[1,2,{"z":null}]}');
SELECT sandbox_persist.artifact_save(json_build_object('artifactId', 'm23-art', 'runId', 'm23-run', 'threadId', 'm23-thread',
    'blobKey', :'m23_art', 'name', 'a.bin', 'mimeType', 'application/octet-stream', 'size', 12, 'createdAt', 1.5));
SELECT sandbox_persist.artifact_save('{"artifactId":"m23-src","runId":"m23-run","threadId":"m23-thread","blobKey":"artifacts/m23-run/m23-src","name":"s","mimeType":"text/plain","size":1,"createdAt":2}');
SELECT sandbox_persist.generation_run_create_or_resume('{"runId":"m23-gen","threadId":"m23-thread","activity":"image","provider":"p","model":"m","startedAt":1}');
SELECT sandbox_persist.generation_run_update('m23-gen', '{"status":"completed","result":{"url":"u"},"finishedAt":3}');
CREATE FUNCTION pg_temp.m23_reads() RETURNS text LANGUAGE sql AS $$
    SELECT concat_ws(E'\n',
        sandbox_persist.message_load_thread('m23-thread')::text,
        sandbox_persist.checkpoint_list('m23-thread')::text,
        sandbox_persist.checkpoint_get('m23-cp1')::text,
        sandbox_persist.checkpoint_get_head('m23-thread'),
        sandbox_persist.checkpoint_list_blob_references()::text,
        sandbox_persist.interrupt_list('m23-thread')::text,
        sandbox_persist.metadata_get('m23-ns', 'm23-key')::text,
        sandbox_persist.artifact_list_for_thread('m23-thread')::text,
        sandbox_persist.generation_run_get('m23-gen')::text)
$$;
CREATE FUNCTION pg_temp.m23_tables() RETURNS text LANGUAGE sql AS $$
    SELECT string_agg(t || ':' || pg_temp.rows_of(t), E'\n' ORDER BY t)
    FROM unnest(ARRAY['messages', 'checkpoints', 'checkpoint_threads', 'checkpoint_blob_refs',
                      'conversation_blocks', 'interrupts', 'metadata', 'artifacts', 'generation_runs']) AS t
$$;
SELECT pg_temp.m23_reads() AS m23_reads, pg_temp.m23_tables() AS m23_tables \gset
SET LOCAL sandbox_persist.run_retention = '1s';
SET LOCAL sandbox_persist.event_log_retention = '1s';
SET LOCAL sandbox_persist.lock_purge_after = 0;
SET LOCAL sandbox_persist.watchdog_idle = 1;
SELECT sandbox_persist.maintain(1000, :r);
SELECT sandbox_persist.maintain(1000, :r + 3650 * :d);
SELECT ok(NOT pg_temp.run_exists('m23-run'), 'M23.1 (the aggressive settings did delete the old terminal run)');
SELECT is(pg_temp.m23_reads(), :'m23_reads',
    'M23.2 transcript, checkpoints, head, references, interrupts, metadata, artifacts and generation run read back identically');
SELECT is(pg_temp.m23_tables(), :'m23_tables', 'M23.3 their tables are byte-identical, row for row');
SELECT ok(pg_temp.blob_exists(:'m23_key') AND pg_temp.blob_exists(:'m23_art'), 'M23.4 their blobs are kept');
RESET sandbox_persist.run_retention;
RESET sandbox_persist.event_log_retention;
RESET sandbox_persist.lock_purge_after;
RESET sandbox_persist.watchdog_idle;

------------------------------------------------------------------------------
-- The overview view.
------------------------------------------------------------------------------
SELECT sandbox_persist._reset_for_tests();
SELECT pg_temp.now_ms() AS r \gset
SET LOCAL sandbox_persist.reaper_ttl = 60;
SELECT pg_temp.run('o-running'), pg_temp.run('o-detached-old', json_build_object('detachedSince', :r - 120000)),
       pg_temp.run('o-detached-new', json_build_object('detachedSince', :r)),
       pg_temp.run('o-interrupted', NULL, 'interrupted'), pg_temp.run('o-completed', '{"status":"completed"}'),
       pg_temp.run('o-failed', '{"status":"failed"}'), pg_temp.run('o-aborted', NULL, 'aborted'),
       pg_temp.run('o-aborted-2', NULL, 'aborted');
SELECT sandbox_persist.lock_acquire('o-live', 600000), sandbox_persist.lock_acquire('o-expired', 1000, :r - 100000);
SELECT sandbox_persist.event_log_append('o-running', '[{"i":1}]'), sandbox_persist.event_log_append('o-chat', '[{"i":1}]'),
       sandbox_persist.event_log_close('o-completed');
SELECT pg_temp.put_ca('o-blob', :r), sandbox_persist.blob_put('app/o', '\x0102030405', NULL, :r);
SELECT sandbox_persist.blob_upload_begin('o/upload', NULL, :r);
SELECT is((SELECT to_jsonb(o) - 'blob_stored_bytes' - 'maintenance_last_run' - 'maintenance_last_summary'
                               - 'maintenance_health'
             FROM sandbox_persist.overview o),
    '{"runs_running":3,"runs_interrupted":1,"runs_completed":1,"runs_failed":1,"runs_aborted":2,
      "runs_detached":2,"runs_detached_past_ttl":1,"locks_held":1,"event_logs_open":2,"blobs":2,
      "blob_raw_bytes":11,"blobs_awaiting_gc":1,"uploads_open":1,"attention_items":0,
      "checkpoint_leases_held":0,"event_logs_producer_lost":0,"checkpoint_writer_takeovers":0,
      "lock_takeovers":0,"maintenance_last_duration_ms":null,
      "gc_backlog":{"blobs":0,"uploads":0,"locks":0,"eventLogs":0,"runs":0,"conversationBlocks":0},
      "maintenance_scheduled":false,"maintenance_overdue":false,"maintenance_failing":false,
      "maintenance_last_failure":null}'::jsonb,
    'overview.1 overview counts runs by status, detached runs (and those past reaper_ttl), live locks, open logs, blobs, bytes, GC backlog, uploads, attention');
SELECT cmp_ok((SELECT blob_stored_bytes FROM sandbox_persist.overview)::bigint, '>', 0::bigint,
    'overview.2 blob_stored_bytes counts the stored chunk bytes');
SELECT ok((SELECT maintenance_last_run IS NULL AND maintenance_last_summary IS NULL FROM sandbox_persist.overview),
    'overview.3 before any maintenance the last run is NULL');
SELECT sandbox_persist.maintain() AS o_summary \gset
SELECT is((SELECT maintenance_last_summary::jsonb FROM sandbox_persist.overview), :'o_summary'::jsonb,
    'overview.4 after maintain() the last summary is its answer');
SELECT ok((SELECT maintenance_last_run BETWEEN clock_timestamp() - interval '1 minute' AND clock_timestamp()
             FROM sandbox_persist.overview), 'overview.5 and the last run time is now');
SELECT is((SELECT locks_held FROM sandbox_persist.overview), 1::bigint,
    'overview.6 after maintenance the counts still hold (one live lock)');
RESET sandbox_persist.reaper_ttl;

------------------------------------------------------------------------------
-- M22 (SQL part): schedule and unschedule the pg_cron job.
------------------------------------------------------------------------------
SELECT sandbox_persist.unschedule_maintenance();
SELECT sandbox_persist.schedule_maintenance() AS m22_job \gset
SELECT is((SELECT count(*) FROM cron.job WHERE jobname = 'sandbox_persist_maintenance'), 1::bigint,
    'M22.1 schedule_maintenance() creates one job named sandbox_persist_maintenance');
SELECT is((SELECT ARRAY[jobid::text, schedule, command, database, username] FROM cron.job
            WHERE jobname = 'sandbox_persist_maintenance'),
    ARRAY[:'m22_job', '* * * * *', 'SELECT sandbox_persist.maintain(100000)', current_database()::text, current_user::text],
    'M22.2 it returns the job id; the job runs maintain(100000) every minute in this database as the caller');
SELECT is(sandbox_persist.schedule_maintenance('*/5 * * * *', 50)::text, :'m22_job',
    'M22.3 a second call returns the same job id');
SELECT is((SELECT count(*) FROM cron.job WHERE jobname = 'sandbox_persist_maintenance'), 1::bigint,
    'M22.4 and does not add another job');
SELECT is((SELECT ARRAY[schedule, command] FROM cron.job WHERE jobname = 'sandbox_persist_maintenance'),
    ARRAY['*/5 * * * *', 'SELECT sandbox_persist.maintain(50)'], 'M22.5 it updates the schedule and max_rows');
SELECT ok(NOT (SELECT prosecdef FROM pg_proc WHERE oid = 'sandbox_persist.schedule_maintenance(text,integer)'::regprocedure),
    'M22.6 schedule_maintenance is SECURITY INVOKER');
SELECT ok(sandbox_persist.unschedule_maintenance(), 'M22.7 unschedule_maintenance() returns true');
SELECT is((SELECT count(*) FROM cron.job WHERE jobname = 'sandbox_persist_maintenance'), 0::bigint,
    'M22.8 and removes the job');
SELECT ok(NOT sandbox_persist.unschedule_maintenance(), 'M22.9 a second unschedule returns false');
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.schedule_maintenance('* * * * *', -1)$$, '22023',
    'M22.10 schedule_maintenance with max_rows -1');
SELECT is((SELECT count(*) FROM cron.job WHERE jobname = 'sandbox_persist_maintenance'), 0::bigint,
    'M22.11 the refused call scheduled nothing');

-- The overview reads the reaper TTL with its unit applied.
SET LOCAL sandbox_persist.reaper_ttl = '10min';
SELECT is(sandbox_persist._reaper_ttl_ms(), 600000::bigint,
    'M15.20 the overview''s reaper TTL is the setting in milliseconds');

-- maintain() bounds its own waits with lock_timeout; the caller's setting survives.
SET LOCAL lock_timeout = '7s';
SELECT lives_ok($$SELECT sandbox_persist.maintain()$$, 'M1.20 maintain() runs with a caller lock_timeout');
SELECT is(current_setting('lock_timeout'), '7s',
    'M1.21 maintain() leaves the caller''s lock_timeout as it was');

SELECT * FROM finish();
ROLLBACK;
