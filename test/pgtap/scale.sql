-- pgTAP: costs that stay flat as the tables grow (issue 31, docs/monitoring.md
-- "What a scrape costs"): one collation for every text column (SC1), the
-- counters the overview reads agree with the tables through inserts, status
-- changes, overwrites, deletes and a rolled-back change (SC2), blob
-- collection looks at a referenced blob once, until a reference goes away
-- (SC3), and no monitoring read or maintenance round scans a whole large
-- table (SC4, judged by the transaction's own seq_scan counts on tables of
-- 20 000 rows with fresh statistics), run_list_reclaimable's limit (SC5), a
-- backlog larger than one batch drained in one call within max_rows (SC6),
-- the watchdog keeps the oldest 100 items of a kind (SC7).
--
-- Run with: pg_prove -d <db> test/pgtap/scale.sql
-- (needs sandbox_persist.allow_test_reset and allow_client_clock on).
BEGIN;
SELECT plan(39);
SELECT sandbox_persist._reset_for_tests();
SET LOCAL sandbox_persist.allow_client_clock = on;

CREATE FUNCTION pg_temp.now_ms() RETURNS bigint LANGUAGE sql AS $$
    SELECT (extract(epoch FROM clock_timestamp()) * 1000)::bigint
$$;
CREATE FUNCTION pg_temp.counter(name text) RETURNS bigint LANGUAGE sql AS $$
    SELECT sandbox_persist._row_count(name)
$$;
-- the sequential scans this transaction started on each extension table
CREATE FUNCTION pg_temp.seq_scans() RETURNS jsonb LANGUAGE sql AS $$
    SELECT coalesce(jsonb_object_agg(relname, seq_scan), '{}')
      FROM pg_stat_xact_user_tables WHERE schemaname = 'sandbox_persist'
$$;
-- the rows this transaction read from each extension table, by any scan
CREATE FUNCTION pg_temp.rows_read() RETURNS jsonb LANGUAGE sql AS $$
    SELECT coalesce(jsonb_object_agg(relname, seq_tup_read + coalesce(idx_tup_fetch, 0)), '{}')
      FROM pg_stat_xact_user_tables WHERE schemaname = 'sandbox_persist'
$$;
CREATE FUNCTION pg_temp.put_ca(body text, at bigint) RETURNS text LANGUAGE sql AS $$
    SELECT sandbox_persist.blob_put('sandbox-files/sha256/' || encode(sha256(convert_to(body, 'UTF8')), 'hex'),
                                    convert_to(body, 'UTF8'), NULL, at)->>'key'
$$;

------------------------------------------------------------------------------
-- SC1: every text column of every table is COLLATE "C", so a comparison of
-- two key columns can use the index of either (runs.sandbox_key against
-- instances.instance_key was the database collation before 0.5.0).
------------------------------------------------------------------------------
SELECT is(ARRAY(SELECT c.relname || '.' || a.attname
                  FROM pg_attribute a
                  JOIN pg_class c ON c.oid = a.attrelid
                  JOIN pg_namespace n ON n.oid = c.relnamespace
                 WHERE n.nspname = 'sandbox_persist' AND c.relkind = 'r'
                   AND a.attnum > 0 AND NOT a.attisdropped AND a.attcollation <> 0
                   AND a.attcollation <> 'pg_catalog."C"'::regcollation
                 ORDER BY 1), '{}'::text[],
    'SC1.1 no text column of the extension''s tables has a collation other than "C"');

------------------------------------------------------------------------------
-- SC2: the counters follow every change, and a rolled-back one not at all.
------------------------------------------------------------------------------
SELECT sandbox_persist.run_create_or_resume(json_build_object('runId', 'sc2-' || i, 'threadId', 'sc2-t',
           'startedAt', i, 'status', 'running'))
  FROM generate_series(1, 5) i;
SELECT sandbox_persist.run_update('sc2-1', '{"status": "completed", "finishedAt": 10}');
SELECT sandbox_persist.run_update('sc2-2', '{"status": "failed", "finishedAt": 10}');
SELECT sandbox_persist.run_update('sc2-3', '{"usage": {"tokens": 1}}');
SAVEPOINT sc2;
SELECT sandbox_persist.run_update('sc2-4', '{"status": "aborted", "finishedAt": 10}');
ROLLBACK TO SAVEPOINT sc2;
DELETE FROM sandbox_persist.runs WHERE run_id = 'sc2-5';
SELECT is(ARRAY[pg_temp.counter('runs.running'), pg_temp.counter('runs.completed'),
                pg_temp.counter('runs.failed'), pg_temp.counter('runs.aborted')],
          ARRAY(SELECT count(*) FILTER (WHERE status = s) FROM sandbox_persist.runs,
                       unnest(ARRAY['running', 'completed', 'failed', 'aborted']) WITH ORDINALITY u(s, o)
                 GROUP BY o ORDER BY o),
    'SC2.1 runs by status: the counters equal the rows after creates, status changes, a rollback and a delete');
SELECT is(pg_temp.counter('runs.running'), 2::bigint, 'SC2.2 two runs are still running');
SELECT sandbox_persist.blob_put('sc2/small', convert_to('small', 'UTF8'));
SELECT sandbox_persist.blob_put('sc2/big', convert_to(repeat('big and varied ', 40000) || random()::text, 'UTF8'));
SELECT sandbox_persist.blob_put('sc2/small', convert_to('small, overwritten', 'UTF8'));
SELECT sandbox_persist.blob_put('sc2/gone', convert_to('gone', 'UTF8'));
SELECT sandbox_persist.blob_delete('sc2/gone');
SELECT is(ARRAY[pg_temp.counter('blobs'), pg_temp.counter('blob_raw_bytes'), pg_temp.counter('blob_stored_bytes')],
          ARRAY[(SELECT count(*) FROM sandbox_persist.blobs),
                (SELECT sum(size)::bigint FROM sandbox_persist.blobs),
                (SELECT coalesce(sum(pg_column_size(c.data)), 0)::bigint FROM sandbox_persist.blob_chunks c)
                + (SELECT coalesce(sum(pg_column_size(inline_data)), 0)::bigint FROM sandbox_persist.blobs)],
    'SC2.3 blobs, raw bytes and stored bytes equal the rows after puts, an overwrite and a delete');
SELECT ok(pg_temp.counter('blob_stored_bytes') > 0 AND pg_temp.counter('blob_stored_bytes') < pg_temp.counter('blob_raw_bytes'),
    'SC2.4 stored bytes are counted after compression');
SELECT is((SELECT array_agg(DISTINCT backend_pid) FROM sandbox_persist.row_counts), ARRAY[pg_backend_pid()],
    'SC2.5 every change went to this backend''s own rows');
SELECT is((SELECT runs_running FROM sandbox_persist.overview), 2::bigint, 'SC2.6 the overview reads the counter');
-- a backend that has exited (no live backend has pid 2^31 - 1) left a delta
INSERT INTO sandbox_persist.row_counts (counter, backend_pid, value) VALUES ('sc2.fold', 2147483647, 7);
SELECT sandbox_persist.maintain();
SELECT is(ARRAY(SELECT format('%s=%s', backend_pid, value) FROM sandbox_persist.row_counts
                 WHERE counter = 'sc2.fold' ORDER BY backend_pid), ARRAY['0=7'],
    'SC2.7 maintain() folds the rows of exited backends into row 0, keeping their sum');
SELECT is((SELECT count(*) FROM sandbox_persist.row_counts WHERE backend_pid = pg_backend_pid()) > 0, true,
    'SC2.8 and leaves a live backend''s rows alone');

------------------------------------------------------------------------------
-- SC3: A1 looks at a referenced blob once; it comes back when its last
-- reference goes.
------------------------------------------------------------------------------
SELECT sandbox_persist._reset_for_tests();
SELECT pg_temp.now_ms() AS r \gset
SELECT pg_temp.put_ca('sc3 referenced', :r - 172800000) AS sc3_k \gset
SELECT pg_temp.put_ca('sc3 unreferenced ' || i, :r - 172800000) FROM generate_series(1, 2) i;
SELECT sandbox_persist.checkpoint_acquire_writer('sc3-thread', 600000) AS w \gset
-- A root checkpoint `id` of sc3-thread whose one file `path` names blob `key`.
CREATE FUNCTION pg_temp.append_root(id text, path text, key text, writer json) RETURNS json LANGUAGE sql AS $$
    SELECT sandbox_persist.checkpoint_append(json_build_object(
               'checkpoint', json_build_object('id', id, 'threadId', 'sc3-thread', 'parentCheckpointId', NULL,
                   'createdAt', 1, 'reason', 'automatic',
                   'files', json_build_array(json_build_object('path', path, 'kind', 'file', 'blobKey', key,
                                                               'size', 1)),
                   'artifacts', '[]'::json),
               'expectedHeadId', NULL, 'writer', writer), '[]')
$$;
SELECT pg_temp.append_root('sc3-cp', 'a.txt', :'sc3_k', :'w');
SELECT is((SELECT count(*) FROM sandbox_persist.blobs WHERE NOT gc_settled), 3::bigint,
    'SC3.1 the new blobs wait for maintenance (blobs_gc)');
SELECT is((sandbox_persist.maintain(1000, :r)->>'blobsDeleted')::int, 2, 'SC3.2 the two unreferenced ones are collected');
SELECT is((SELECT count(*) FROM sandbox_persist.blobs WHERE NOT gc_settled), 0::bigint,
    'SC3.3 the referenced one is settled, out of blobs_gc: the next rounds do not read it');
SELECT is((SELECT blobs_awaiting_gc FROM sandbox_persist.overview), 0::bigint, 'SC3.4 nothing awaits collection');
SELECT sandbox_persist.checkpoint_delete_head(json_build_object('threadId', 'sc3-thread', 'checkpointId', 'sc3-cp',
                                              'writer', :'w'::json));
SELECT is((SELECT array_agg(blob_key) FROM sandbox_persist.blob_gc_queue), ARRAY[:'sc3_k'],
    'SC3.5 deleting its checkpoint queues the key');
SELECT is((SELECT blobs_awaiting_gc FROM sandbox_persist.overview), 1::bigint, 'SC3.6 the overview counts it');
SELECT is((sandbox_persist.maintain(1000, :r)->>'blobsDeleted')::int, 1, 'SC3.7 the next round collects it');
SELECT is((SELECT count(*) FROM sandbox_persist.blob_gc_queue), 0::bigint, 'SC3.8 and drops its queue entry');
-- Within the grace: a referenced blob is settled at once; once its reference
-- goes it waits in blobs_gc again, kept until the grace has passed.
SELECT pg_temp.put_ca('sc3 recent', :r - 1000) AS sc3_recent \gset
SELECT pg_temp.append_root('sc3-cp2', 'b.txt', :'sc3_recent', :'w');
SELECT sandbox_persist.maintain(1000, :r);
SELECT is((SELECT gc_settled FROM sandbox_persist.blobs WHERE blob_key = :'sc3_recent'), true,
    'SC3.9 a referenced blob within its grace is settled too');
SELECT sandbox_persist.checkpoint_delete_head(json_build_object('threadId', 'sc3-thread', 'checkpointId', 'sc3-cp2',
                                              'writer', :'w'::json));
SELECT is((sandbox_persist.maintain(1000, :r)->>'blobsDeleted')::int, 0, 'SC3.10 unreferenced within its grace, it is kept');
SELECT is((SELECT gc_settled FROM sandbox_persist.blobs WHERE blob_key = :'sc3_recent'), false,
    'SC3.11 and waits in blobs_gc again');
SELECT is((sandbox_persist.maintain(1000, :r + 172800000)->>'blobsDeleted')::int, 1, 'SC3.12 past its grace it is collected');

------------------------------------------------------------------------------
-- SC4: no monitoring read and no maintenance round scans a large table.
------------------------------------------------------------------------------
SELECT sandbox_persist._reset_for_tests();
SELECT pg_temp.now_ms() AS r \gset
INSERT INTO sandbox_persist.runs (run_id, thread_id, status, started_at, changed_at, status_changed_at, sandbox_key,
                                  detached_since)
SELECT 'sc4-' || i, 'sc4-t' || (i % 2000), CASE WHEN i % 10 = 0 THEN 'running' ELSE 'completed' END,
       1, :r - 864000000, :r - 864000000, 'sc4-sbx-' || i, CASE WHEN i % 100 = 0 THEN :r - 864000000 END
  FROM generate_series(1, 20000) i;
INSERT INTO sandbox_persist.instances (instance_key, provider, provider_sandbox_id, thread_id, latest_run_id, updated_at)
SELECT 'sc4-sbx-' || i, 'e2b', 'p-' || i, 'sc4-t' || (i % 2000), 'sc4-' || i, :r - 864000000
  FROM generate_series(1, 20000) i;
INSERT INTO sandbox_persist.event_logs (run_id, created_at, last_append_at, closed_at, tail_seq)
SELECT 'sc4-' || i, :r, :r, :r, 5 FROM generate_series(1, 20000) i;
INSERT INTO sandbox_persist.event_log_entries (log_id, seq, chunk, digest)
SELECT l.log_id, s, '{"type":"TEXT_MESSAGE_CONTENT","delta":"x"}', 0
  FROM sandbox_persist.event_logs l, generate_series(1, 5) s;
INSERT INTO sandbox_persist.checkpoint_threads (thread_id, fence)
SELECT 'sc4-t' || i, 1 FROM generate_series(1, 20000) i;
INSERT INTO sandbox_persist.locks (lock_key, owner_token, fence, acquired_at, expires_at)
SELECT 'run-driver:sc4-' || i, gen_random_uuid(), i, :r, CASE WHEN i % 10 = 0 THEN :r + 600000 ELSE :r - 60000 END
  FROM generate_series(1, 20000) i;
ANALYZE sandbox_persist.runs, sandbox_persist.instances, sandbox_persist.event_logs,
        sandbox_persist.event_log_entries, sandbox_persist.checkpoint_threads, sandbox_persist.locks;
SELECT pg_temp.seq_scans() AS before, pg_temp.rows_read() AS read_before \gset
SELECT ok((SELECT count(*) FROM sandbox_persist.overview) = 1, 'SC4.1 the overview is read');
SELECT ok((SELECT count(*) FROM sandbox_persist.metrics()) > 20, 'SC4.2 metrics() is read');
SELECT ok(sandbox_persist._maintenance_backlog() IS NOT NULL, 'SC4.3 the backlog is read');
SELECT ok(sandbox_persist.maintain(1000, :r) IS NOT NULL, 'SC4.4 maintain() runs a round');
SELECT ok(sandbox_persist.instance_gc_candidates(604800000, 100, :r) IS NOT NULL, 'SC4.5 instance_gc_candidates is read');
SELECT is((SELECT jsonb_object_agg(k, v::bigint - coalesce((:'before'::jsonb ->> k)::bigint, 0))
             FROM jsonb_each_text(pg_temp.seq_scans()) e(k, v)
            WHERE k IN ('runs', 'instances', 'event_logs', 'event_log_entries', 'checkpoint_threads', 'locks')
              AND v::bigint > coalesce((:'before'::jsonb ->> k)::bigint, 0)), NULL,
    'SC4.6 none of them started a sequential scan of runs, instances, event logs, entries, threads or locks');
SELECT is((SELECT jsonb_object_agg(k, v::bigint - coalesce((:'read_before'::jsonb ->> k)::bigint, 0))
             FROM jsonb_each_text(pg_temp.rows_read()) e(k, v)
            WHERE k IN ('runs', 'instances', 'event_logs', 'checkpoint_threads', 'locks')
              AND v::bigint - coalesce((:'read_before'::jsonb ->> k)::bigint, 0) >= 10000), NULL,
    'SC4.7 and none read half of one of those tables (10 000 of 20 000 rows) by an index either');

------------------------------------------------------------------------------
-- SC5: run_list_reclaimable with a limit returns the first max_rows of the
-- full list, in its order; a negative limit is 22023.
------------------------------------------------------------------------------
SELECT is(json_array_length(sandbox_persist.run_list_reclaimable(:r, 0)), 200, 'SC5.1 two hundred detached runs are reclaimable');
SELECT is(sandbox_persist.run_list_reclaimable(:r, 0, 3)::jsonb,
          (SELECT jsonb_agg(e ORDER BY o) FROM jsonb_array_elements(sandbox_persist.run_list_reclaimable(:r, 0)::jsonb)
                                               WITH ORDINALITY x(e, o) WHERE o <= 3),
    'SC5.2 max_rows 3 gives the first three, in the same order');
SELECT throws_ok($$SELECT sandbox_persist.run_list_reclaimable(0, 0, -1)$$, '22023', NULL, 'SC5.3 a negative max_rows is 22023');

------------------------------------------------------------------------------
-- SC6: a collecting action takes up to max_rows rows in one call, in batches
-- of 1000 (maintenance_time_budget 0: no time bound here, so the result does
-- not depend on the machine's speed).
------------------------------------------------------------------------------
SELECT sandbox_persist._reset_for_tests();
SET LOCAL sandbox_persist.run_retention = '1h';
SET LOCAL sandbox_persist.maintenance_time_budget = 0;
INSERT INTO sandbox_persist.runs (run_id, thread_id, status, started_at, changed_at, status_changed_at)
SELECT 'sc6-' || i, 'sc6-t', 'completed', 1, 1, 1 FROM generate_series(1, 3500) i;
SELECT is(sandbox_persist._maintenance_backlog(:r)->>'runs', '1000',
    'SC6.0 the backlog counts them up to 1000 (at least 1000), so a scrape reads no more than that');
SELECT is((sandbox_persist.maintain(1500, :r)->>'runsDeleted')::int, 1500,
    'SC6.1 max_rows 1500 bounds the call: 1500 of 3500 expired runs, more than one batch');
SELECT is((sandbox_persist.maintain(NULL, :r)->>'runsDeleted')::int, 2000,
    'SC6.2 with the default max_rows the next call takes the other 2000');
SELECT is(pg_temp.counter('runs.completed'), 0::bigint, 'SC6.3 and the counter follows the deletes');

------------------------------------------------------------------------------
-- SC7: the watchdog records at most 100 items of a kind, the oldest; one that
-- stops holding makes room for the next.
------------------------------------------------------------------------------
SELECT sandbox_persist._reset_for_tests();
INSERT INTO sandbox_persist.runs (run_id, thread_id, status, started_at, changed_at, status_changed_at)
SELECT format('sc7-%s', lpad(i::text, 3, '0')), 'sc7-t', 'running', 1, 1000 + i, 1000 + i
  FROM generate_series(1, 150) i;
SELECT is((sandbox_persist.maintain(1000, :r)->>'attentionNew')::int, 100, 'SC7.1 150 invisible runs: 100 items recorded');
SELECT is(ARRAY(SELECT e->>'runId' FROM json_array_elements(sandbox_persist.attention_list()) e ORDER BY 1),
          ARRAY(SELECT format('sc7-%s', lpad(i::text, 3, '0')) FROM generate_series(1, 100) i),
    'SC7.2 the oldest 100, by status change');
SELECT sandbox_persist.lock_acquire('run-driver:sc7-' || lpad(i::text, 3, '0'), 600000, :r)
  FROM generate_series(1, 10) i;
SELECT is((sandbox_persist.maintain(1000, :r + 1000)::jsonb - ARRAY['detachedRuns', 'dueRuns']) @> '{"attentionNew": 10, "attentionResolved": 10}',
          true, 'SC7.3 ten runs with a driver again: their items go, the next ten come');
SELECT is(ARRAY(SELECT e->>'runId' FROM json_array_elements(sandbox_persist.attention_list()) e ORDER BY 1),
          ARRAY(SELECT format('sc7-%s', lpad(i::text, 3, '0')) FROM generate_series(11, 110) i),
    'SC7.4 the list is again the oldest 100 that hold');

SELECT * FROM finish();
ROLLBACK;
