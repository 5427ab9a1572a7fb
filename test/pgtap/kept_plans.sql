-- pgTAP: kept plans stay good when statistics say "empty" (docs/architecture.md,
-- "Kept plans"). Our own cases KP1-KP3.
--
-- ANALYZE of an empty table records 0 rows (what a VACUUM of it records
-- too; VACUUM cannot run inside this file's transaction), and the planner
-- believes it. A kept statement planned then must still find its rows through
-- an index, so bulk calls through the API never scan a table sequentially
-- for a key lookup: counted with pg_stat_get_xact_numscans (sequential scans
-- of a table in this transaction). The setting behind it holds only while
-- one of the extension's kept statements is planned (KP3).
--
-- Run with: pg_prove -d <db> test/pgtap/kept_plans.sql (needs
-- sandbox_persist.allow_test_reset on). Each pg_prove file is a new backend,
-- so every kept statement is planned afresh here.
BEGIN;
SELECT plan(11);
SELECT sandbox_persist._reset_for_tests();

-- Every table of the extension analysed while empty: 0 pages, 0 rows.
SELECT format('ANALYZE %s', c.oid::regclass) FROM pg_class c
 WHERE c.relnamespace = 'sandbox_persist'::regnamespace AND c.relkind = 'r' \gexec
SELECT is((SELECT sum(reltuples)::int FROM pg_class
            WHERE relnamespace = 'sandbox_persist'::regnamespace AND relkind = 'r'),
    0, 'KP0 the statistics of every table say "empty" (0 rows, not unknown)');

-- The plan of a key lookup of metadata, planned here from SQL.
CREATE FUNCTION pg_temp.explain_metadata() RETURNS SETOF text LANGUAGE plpgsql AS $$
BEGIN
    RETURN QUERY EXPLAIN (COSTS OFF)
        SELECT * FROM sandbox_persist.metadata WHERE namespace = 'kp' AND meta_key = 'k';
END
$$;

CREATE FUNCTION pg_temp.seq_scans(t text) RETURNS bigint LANGUAGE sql AS $$
    SELECT pg_stat_get_xact_numscans(('sandbox_persist.' || t)::regclass)
$$;
SELECT pg_temp.seq_scans('blobs') AS blobs0, pg_temp.seq_scans('runs') AS runs0,
       pg_temp.seq_scans('locks') AS locks0, pg_temp.seq_scans('event_logs') AS logs0,
       pg_temp.seq_scans('instances') AS inst0 \gset

------------------------------------------------------------------------------
-- KP1: 300 calls of each store through the API, every one a key lookup.
------------------------------------------------------------------------------
SELECT count(sandbox_persist.blob_put(
           'sandbox-files/sha256/' || encode(sha256(convert_to('kp ' || i, 'UTF8')), 'hex'),
           convert_to('kp ' || i, 'UTF8'), NULL, NULL))
  FROM generate_series(1, 300) i;
SELECT count(sandbox_persist.blob_put(
           'sandbox-files/sha256/' || encode(sha256(convert_to('kp ' || i, 'UTF8')), 'hex'),
           convert_to('kp ' || i, 'UTF8'), NULL, NULL))
  FROM generate_series(1, 300) i;
SELECT is(pg_temp.seq_scans('blobs') - :blobs0, 0::bigint,
    'KP1.1 600 content-addressed blob_put calls (300 new, 300 found by key): no sequential scan of blobs');
SELECT count(sandbox_persist.run_create_or_resume(json_build_object(
           'runId', 'kp-run-' || i, 'threadId', 'kp-thread', 'startedAt', i))),
       count(sandbox_persist.run_update('kp-run-' || i, '{"driverEpoch":1}')),
       count(sandbox_persist.run_claim('kp-run-' || i)),
       count(sandbox_persist.run_get('kp-run-' || i))
  FROM generate_series(1, 300) i;
SELECT is(pg_temp.seq_scans('runs') - :runs0, 0::bigint,
    'KP1.2 300 runs created, patched, claimed and read: no sequential scan of runs');
SELECT count(sandbox_persist.lock_acquire('kp-lock-' || i, 600000, NULL)),
       count(sandbox_persist.lock_holder('kp-lock-' || i, NULL))
  FROM generate_series(1, 300) i;
SELECT is(pg_temp.seq_scans('locks') - :locks0, 0::bigint,
    'KP1.3 300 locks acquired and read: no sequential scan of locks');
SELECT count(sandbox_persist.event_log_append('kp-run-' || i, '[{"type":"RUN_STARTED"}]', NULL)),
       count(sandbox_persist.event_log_append('kp-run-' || i, '[{"type":"RUN_FINISHED"}]', NULL))
  FROM generate_series(1, 300) i;
SELECT is(pg_temp.seq_scans('event_logs') - :logs0, 0::bigint,
    'KP1.4 600 event-log appends to 300 logs: no sequential scan of event_logs');
SELECT count(sandbox_persist.instance_upsert(json_build_object(
           'key', 'kp-inst-' || i, 'provider', 'fake', 'providerSandboxId', 'sb',
           'threadId', 'kp-thread', 'latestRunId', 'kp-run-' || i, 'updatedAt', i))),
       count(sandbox_persist.instance_get('kp-inst-' || i))
  FROM generate_series(1, 300) i;
SELECT is(pg_temp.seq_scans('instances') - :inst0, 0::bigint,
    'KP1.5 300 instances upserted and read: no sequential scan of instances');

------------------------------------------------------------------------------
-- KP2: the results are those of the index plans (nothing lost or doubled).
------------------------------------------------------------------------------
SELECT is((SELECT count(*)::int FROM sandbox_persist.blobs), 300, 'KP2.1 300 blobs');
SELECT is((SELECT count(*)::int FROM sandbox_persist.runs WHERE driver_epoch = 2), 300,
    'KP2.2 300 runs at driverEpoch 2');
SELECT is((SELECT sum(tail_seq)::int FROM sandbox_persist.event_logs), 600, 'KP2.3 300 logs of 2 chunks');

------------------------------------------------------------------------------
-- KP3: other statements are planned as usual, with the session's setting.
------------------------------------------------------------------------------
SELECT is(current_setting('enable_seqscan'), 'on', 'KP3.1 enable_seqscan is still on');
SELECT ok((SELECT string_agg(p, E'\n') FROM (
              SELECT * FROM pg_temp.explain_metadata()) x(p)) ~ 'Seq Scan',
    'KP3.2 a key lookup of the empty metadata table from SQL is still a sequential scan');

SELECT * FROM finish();
ROLLBACK;
