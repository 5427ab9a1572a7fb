-- pgTAP: run_claim, the one-statement claim step (docs/contract/runs.md §5).
-- Cases: K3, K4 (K1 and K2 are in runs.sql).
-- Run with: pg_prove -d <db> test/pgtap/claims.sql (needs allow_test_reset).
BEGIN;
SELECT plan(32);
SELECT sandbox_persist._reset_for_tests();

------------------------------------------------------------------------------
-- Helpers (temporary, gone at ROLLBACK).
------------------------------------------------------------------------------

-- Every run row, all columns (the internal change time included), in a fixed
-- order: two equal values mean nothing was inserted, deleted or changed.
CREATE FUNCTION pg_temp.state() RETURNS text LANGUAGE sql AS $$
    SELECT 'runs:' || (SELECT count(*) FROM sandbox_persist.runs) || E'\n' ||
           coalesce((SELECT string_agg(r::text, E'\n' ORDER BY r.run_id) FROM sandbox_persist.runs r), '')
$$;

-- One row, as text (all columns).
CREATE FUNCTION pg_temp.row_of(id text) RETURNS text LANGUAGE sql AS $$
    SELECT r::text FROM sandbox_persist.runs r WHERE r.run_id = id
$$;

\ir lib/durable_helpers.psql

------------------------------------------------------------------------------
-- K3: claiming a running or interrupted run bumps the epoch and returns it.
------------------------------------------------------------------------------
SELECT sandbox_persist.run_create_or_resume('{"runId":"k3-run","threadId":"k3-thread","startedAt":100}');
SELECT is(sandbox_persist.run_claim('k3-run')::jsonb,
    '{"outcome":"claimed","epoch":1,"threadId":"k3-thread"}'::jsonb,
    'K3.1 a first claim of a running run without driverEpoch returns {claimed, epoch 1, threadId}');
SELECT is(sandbox_persist.run_get('k3-run')::jsonb,
    '{"runId":"k3-run","threadId":"k3-thread","status":"running","startedAt":100,"driverEpoch":1}'::jsonb,
    'K3.2 the stored record now has driverEpoch 1 and nothing else changed');
SELECT is(sandbox_persist.run_claim('k3-run')::jsonb,
    '{"outcome":"claimed","epoch":2,"threadId":"k3-thread"}'::jsonb,
    'K3.3 the next claim returns epoch 2 (old + 1)');
SELECT is((sandbox_persist.run_get('k3-run')->>'driverEpoch')::int, 2,
    'K3.4 the stored driverEpoch is 2');
SELECT is(sandbox_persist.run_claim('k3-run')::text,
    '{"outcome":"claimed","epoch":3,"threadId":"k3-thread"}',
    'K3.5 the claim result has exactly the keys outcome, epoch, threadId (in that order)');

-- An explicitly set epoch is the base.
SELECT sandbox_persist.run_create_or_resume('{"runId":"k3-set","threadId":"k3-thread-2","startedAt":200}');
SELECT sandbox_persist.run_update('k3-set', '{"driverEpoch":41,"sandboxKey":"sb-k3","detachedSince":150,"cancelRequested":false}');
SELECT is(sandbox_persist.run_claim('k3-set')::jsonb,
    '{"outcome":"claimed","epoch":42,"threadId":"k3-thread-2"}'::jsonb,
    'K3.6 a run at driverEpoch 41 is claimed at 42');
SELECT is(sandbox_persist.run_get('k3-set')::jsonb,
    '{"runId":"k3-set","threadId":"k3-thread-2","status":"running","startedAt":200,
      "sandboxKey":"sb-k3","detachedSince":150,"cancelRequested":false,"driverEpoch":42}'::jsonb,
    'K3.7 the claim stores epoch 42 and leaves sandboxKey, detachedSince and cancelRequested alone');

-- An epoch of 0 (allowed over an absent epoch) is the base too: 0 + 1.
SELECT sandbox_persist.run_create_or_resume('{"runId":"k3-zero","threadId":"k3-thread","startedAt":1}');
SELECT sandbox_persist.run_update('k3-zero', '{"driverEpoch":0}');
SELECT is(sandbox_persist.run_claim('k3-zero')::jsonb,
    '{"outcome":"claimed","epoch":1,"threadId":"k3-thread"}'::jsonb,
    'K3.8 a run at driverEpoch 0 is claimed at 1');

-- Interrupted runs can be claimed.
SELECT sandbox_persist.run_create_or_resume(
    '{"runId":"k3-int","threadId":"k3-thread-3","startedAt":300,"status":"interrupted"}');
SELECT is(sandbox_persist.run_claim('k3-int')::jsonb,
    '{"outcome":"claimed","epoch":1,"threadId":"k3-thread-3"}'::jsonb,
    'K3.9 an interrupted run without driverEpoch is claimed at epoch 1');
SELECT sandbox_persist.run_update('k3-int', '{"driverEpoch":7}');
SELECT is(sandbox_persist.run_claim('k3-int')::jsonb,
    '{"outcome":"claimed","epoch":8,"threadId":"k3-thread-3"}'::jsonb,
    'K3.10 an interrupted run at driverEpoch 7 is claimed at 8');
SELECT is(sandbox_persist.run_get('k3-int')::jsonb,
    '{"runId":"k3-int","threadId":"k3-thread-3","status":"interrupted","startedAt":300,"driverEpoch":8}'::jsonb,
    'K3.11 the interrupted run keeps its status and stores epoch 8');

-- A run that went running -> interrupted -> running is claimable throughout.
SELECT sandbox_persist.run_update('k3-int', '{"status":"running"}');
SELECT is(sandbox_persist.run_claim('k3-int')->>'epoch', '9',
    'K3.12 after returning to running the run is claimed at 9');

-- A claimed run's epoch is then guarded by run_update's compare-and-swap: a
-- claimer that wrote the same epoch later is refused (the claim was real).
SELECT is(pg_temp.sp($$SELECT sandbox_persist.run_update('k3-int', '{"driverEpoch":9}')$$),
    'SP201 RUN_EPOCH_NOT_INCREASING',
    'K3.13 re-writing the claimed epoch 9 with run_update -> SP201 (the claim stored it)');

-- Claims of different runs are independent.
SELECT sandbox_persist.run_create_or_resume('{"runId":"k3-other","threadId":"k3-thread","startedAt":1}');
SELECT is(sandbox_persist.run_claim('k3-other')->>'epoch', '1',
    'K3.14 another run is claimed at its own epoch 1');
SELECT is((sandbox_persist.run_get('k3-run')->>'driverEpoch')::int, 3,
    'K3.15 claiming another run leaves k3-run at epoch 3');

-- Ids are exact (bytewise): a claim of a different-case id is a different run.
SELECT is(sandbox_persist.run_claim('K3-RUN')::jsonb, '{"outcome":"unknown"}'::jsonb,
    'K3.16 ids compare bytewise: K3-RUN is unknown');

------------------------------------------------------------------------------
-- K4: unknown and terminal runs are refused and nothing changes.
------------------------------------------------------------------------------
SELECT pg_temp.state() AS before_unknown \gset
SELECT is(sandbox_persist.run_claim('k4-missing')::text, '{"outcome":"unknown"}',
    'K4.1 claiming an unknown run returns exactly {"outcome":"unknown"}');
SELECT is(pg_temp.state(), :'before_unknown', 'K4.2 claiming an unknown run changes nothing (no row created)');
SELECT ok(sandbox_persist.run_get('k4-missing') IS NULL, 'K4.3 the unknown run is still unknown');

SELECT sandbox_persist.run_create_or_resume('{"runId":"k4-completed","threadId":"k4-thread","startedAt":1}');
SELECT sandbox_persist.run_update('k4-completed', '{"driverEpoch":3,"status":"completed","finishedAt":50}');
SELECT sandbox_persist.run_create_or_resume('{"runId":"k4-failed","threadId":"k4-thread","startedAt":2}');
SELECT sandbox_persist.run_update('k4-failed', '{"status":"failed","error":{"message":"boom"}}');
SELECT sandbox_persist.run_create_or_resume('{"runId":"k4-aborted","threadId":"k4-thread","startedAt":3,"status":"aborted"}');

SELECT pg_temp.row_of('k4-completed') AS before_completed \gset
SELECT is(sandbox_persist.run_claim('k4-completed')::text, '{"outcome":"terminal"}',
    'K4.4 claiming a completed run returns exactly {"outcome":"terminal"}');
SELECT is(pg_temp.row_of('k4-completed'), :'before_completed',
    'K4.5 the completed run row is unchanged (epoch 3 kept, change time untouched)');
SELECT is((sandbox_persist.run_get('k4-completed')->>'driverEpoch')::int, 3,
    'K4.6 the completed run still reads driverEpoch 3');

SELECT pg_temp.row_of('k4-failed') AS before_failed \gset
SELECT is(sandbox_persist.run_claim('k4-failed')::jsonb, '{"outcome":"terminal"}'::jsonb,
    'K4.7 claiming a failed run returns {terminal}');
SELECT is(pg_temp.row_of('k4-failed'), :'before_failed',
    'K4.8 the failed run row is unchanged (no epoch appears)');
SELECT ok(NOT sandbox_persist.run_get('k4-failed')::jsonb ? 'driverEpoch',
    'K4.9 the failed run still has no driverEpoch key');

SELECT pg_temp.row_of('k4-aborted') AS before_aborted \gset
SELECT is(sandbox_persist.run_claim('k4-aborted')::jsonb, '{"outcome":"terminal"}'::jsonb,
    'K4.10 claiming an aborted run returns {terminal}');
SELECT is(pg_temp.row_of('k4-aborted'), :'before_aborted', 'K4.11 the aborted run row is unchanged');

-- Refusals leave the whole table as it was.
SELECT pg_temp.state() AS before_all \gset
SELECT sandbox_persist.run_claim('k4-completed'), sandbox_persist.run_claim('k4-failed'),
       sandbox_persist.run_claim('k4-aborted'), sandbox_persist.run_claim('k4-missing');
SELECT is(pg_temp.state(), :'before_all', 'K4.12 repeated refused claims change no run row');

-- Bad ids are rejected like every other run id, and change nothing.
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.run_claim('')$$, '22023',
    'K4.13 run_claim of an empty id');
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.run_claim(NULL)$$, '22004',
    'K4.14 run_claim(NULL)');

SELECT * FROM finish();
ROLLBACK;
