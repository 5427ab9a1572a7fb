-- pgTAP: run store (docs/contract/runs.md).
-- Cases: P03-P07, D1 (D1.0-D1.5), K1, K2, R29, R34 (runs part), S20,
-- V1-V11, V13-V16, V20, V26 (runs part).
-- Run with: pg_prove -d <db> test/pgtap/runs.sql (needs allow_test_reset).
BEGIN;
SELECT plan(284);
SELECT sandbox_persist._reset_for_tests();
\ir lib/foundation_helpers.psql

-- Run ids of a JSON array of run records, in array order (NULL for NULL).
CREATE FUNCTION pg_temp.ids(j json) RETURNS text[] LANGUAGE sql AS $$
    SELECT CASE WHEN j IS NULL THEN NULL ELSE
        coalesce((SELECT array_agg(e->>'runId' ORDER BY n)
                  FROM json_array_elements(j) WITH ORDINALITY AS t(e, n)), '{}') END
$$;

------------------------------------------------------------------------------
-- P03: create, resume idempotently, update, get.
------------------------------------------------------------------------------
SELECT ok(sandbox_persist.run_get('run-missing') IS NULL,
    'P03.1 get of a missing run is SQL NULL');

SELECT is(sandbox_persist.run_create_or_resume(
        '{"runId":"run-1","threadId":"thread-1","startedAt":1000}')::jsonb,
    '{"runId":"run-1","threadId":"thread-1","status":"running","startedAt":1000}'::jsonb,
    'P03.2 create returns exactly {run-1, thread-1, running, 1000}');

SELECT is(sandbox_persist.run_create_or_resume(
        '{"runId":"run-1","threadId":"thread-different","startedAt":9999}')::jsonb,
    '{"runId":"run-1","threadId":"thread-1","status":"running","startedAt":1000}'::jsonb,
    'P03.3 a resume with another thread and start returns the original record');

SELECT is(sandbox_persist.run_get('run-1')::jsonb,
    '{"runId":"run-1","threadId":"thread-1","status":"running","startedAt":1000}'::jsonb,
    'P03.4 the resume changed nothing: get returns the original record');

SELECT is(sandbox_persist.run_update('run-1',
        '{"status":"completed","finishedAt":2000,"usage":{"promptTokens":3,"completionTokens":4,"totalTokens":7}}'),
    true, 'P03.5 update of an existing run returns true');

SELECT is(sandbox_persist.run_get('run-1')::jsonb,
    '{"runId":"run-1","threadId":"thread-1","status":"completed","startedAt":1000,"finishedAt":2000,
      "usage":{"promptTokens":3,"completionTokens":4,"totalTokens":7}}'::jsonb,
    'P03.6 update{completed, 2000, usage 3/4/7} is visible through get');

SELECT is(sandbox_persist.run_create_or_resume(
        '{"runId":"run-1","threadId":"thread-different","startedAt":9999}')::jsonb,
    sandbox_persist.run_get('run-1')::jsonb,
    'P03.7 a resume after the update deep-equals get');

SELECT is(sandbox_persist.run_create_or_resume(
        '{"runId":"run-1","threadId":"thread-different","startedAt":9999}')::jsonb,
    '{"runId":"run-1","threadId":"thread-1","status":"completed","startedAt":1000,"finishedAt":2000,
      "usage":{"promptTokens":3,"completionTokens":4,"totalTokens":7}}'::jsonb,
    'P03.8 the resume returns the complete stored record (usage and finishedAt included)');

SELECT sandbox_persist.run_update('run-1',
    '{"status":"failed","error":{"message":"boom","code":"provider_overloaded"}}');
SELECT is(sandbox_persist.run_get('run-1')->>'status', 'failed',
    'P03.9 update{failed} sets the status');
SELECT is((sandbox_persist.run_get('run-1')->'error')::jsonb,
    '{"message":"boom","code":"provider_overloaded"}'::jsonb,
    'P03.10 the error reads back exactly as {boom, provider_overloaded}, not flattened');
SELECT is(sandbox_persist.run_get('run-1')::jsonb,
    '{"runId":"run-1","threadId":"thread-1","status":"failed","startedAt":1000,"finishedAt":2000,
      "usage":{"promptTokens":3,"completionTokens":4,"totalTokens":7},
      "error":{"message":"boom","code":"provider_overloaded"}}'::jsonb,
    'P03.11 fields absent from the patch keep their values');

SELECT is(sandbox_persist.run_update('run-absent', '{"status":"completed"}'), false,
    'P03.12 update of a missing run returns false and does not throw');
SELECT ok(sandbox_persist.run_get('run-absent') IS NULL,
    'P03.13 update of a missing run creates nothing (get is NULL)');
SELECT is((SELECT count(*) FROM sandbox_persist.runs WHERE run_id = 'run-absent'), 0::bigint,
    'P03.14 update of a missing run inserts no row');

------------------------------------------------------------------------------
-- P04: createOrResume never resurrects a finished run.
------------------------------------------------------------------------------
SELECT sandbox_persist.run_create_or_resume('{"runId":"nc-1","threadId":"nc-t","startedAt":10}');
SELECT sandbox_persist.run_update('nc-1', '{"status":"completed","finishedAt":20}');
SELECT is(sandbox_persist.run_create_or_resume(
        '{"runId":"nc-1","threadId":"nc-t","startedAt":999,"status":"running"}')::jsonb,
    '{"runId":"nc-1","threadId":"nc-t","status":"completed","startedAt":10,"finishedAt":20}'::jsonb,
    'P04.1 a resume passing status running and startedAt 999 returns {completed, 10, 20}');
SELECT is(sandbox_persist.run_get('nc-1')::jsonb,
    '{"runId":"nc-1","threadId":"nc-t","status":"completed","startedAt":10,"finishedAt":20}'::jsonb,
    'P04.2 the stored record is not rewritten by the resume');
SELECT is(sandbox_persist.run_create_or_resume(
        '{"runId":"nc-2","threadId":"nc-t","startedAt":30,"status":"completed"}')::jsonb,
    '{"runId":"nc-2","threadId":"nc-t","status":"completed","startedAt":30}'::jsonb,
    'P04.3 a first call with a terminal status stores it and stamps no finishedAt');

------------------------------------------------------------------------------
-- P05: findActiveRun.
------------------------------------------------------------------------------
SELECT ok(sandbox_persist.run_find_active_run('thread-active') IS NULL,
    'P05.1 findActiveRun of an empty thread is SQL NULL');
SELECT sandbox_persist.run_create_or_resume('{"runId":"active-1","threadId":"thread-active","startedAt":1000}');
SELECT sandbox_persist.run_create_or_resume('{"runId":"active-2","threadId":"thread-active","startedAt":2000}');
SELECT is(sandbox_persist.run_find_active_run('thread-active')::jsonb,
    '{"runId":"active-2","threadId":"thread-active","status":"running","startedAt":2000}'::jsonb,
    'P05.2 the newer of two running runs wins');
SELECT sandbox_persist.run_create_or_resume('{"runId":"other-1","threadId":"thread-other","startedAt":3000}');
SELECT is(sandbox_persist.run_find_active_run('thread-active')->>'runId', 'active-2',
    'P05.3 another thread''s newer running run is ignored');
SELECT sandbox_persist.run_update('active-2', '{"status":"completed","finishedAt":2500}');
SELECT is(sandbox_persist.run_find_active_run('thread-active')::jsonb,
    '{"runId":"active-1","threadId":"thread-active","status":"running","startedAt":1000}'::jsonb,
    'P05.4 when the newer completes the older running run is returned');
SELECT sandbox_persist.run_update('active-1', '{"status":"completed","finishedAt":1500}');
SELECT ok(sandbox_persist.run_find_active_run('thread-active') IS NULL,
    'P05.5 when both are completed findActiveRun is SQL NULL');
SELECT sandbox_persist.run_create_or_resume('{"runId":"active-3","threadId":"thread-active","startedAt":3000}');
SELECT sandbox_persist.run_update('active-3', '{"status":"interrupted"}');
SELECT ok(sandbox_persist.run_find_active_run('thread-active') IS NULL,
    'P05.6 an interrupted run is not active (only status running counts)');
SELECT sandbox_persist.run_create_or_resume('{"runId":"active-4","threadId":"thread-active","startedAt":500}');
SELECT sandbox_persist.run_update('active-4', '{"detachedSince":600,"sandboxKey":"sk-4"}');
SELECT is(sandbox_persist.run_find_active_run('thread-active')->>'runId', 'active-4',
    'P05.7 a detached running run is active (reconnecting clients attach to it)');
-- Re-attach it so the global listReclaimable checks of P07 see only rc-* runs.
SELECT sandbox_persist.run_update('active-4', '{"detachedSince":null}');

------------------------------------------------------------------------------
-- P06: listByThread orders by startedAt.
------------------------------------------------------------------------------
SELECT sandbox_persist.run_create_or_resume('{"runId":"lt-b","threadId":"lt","startedAt":2}');
SELECT sandbox_persist.run_create_or_resume('{"runId":"lt-a","threadId":"lt","startedAt":1}');
SELECT is(pg_temp.ids(sandbox_persist.run_list_by_thread('lt')), ARRAY['lt-a', 'lt-b'],
    'P06.1 runs inserted with startedAt 2 then 1 list as [lt-a, lt-b]');
SELECT is((sandbox_persist.run_list_by_thread('lt')->0)::jsonb,
    '{"runId":"lt-a","threadId":"lt","status":"running","startedAt":1}'::jsonb,
    'P06.2 listByThread elements are complete run records');
SELECT is(sandbox_persist.run_list_by_thread('lt-nobody')::jsonb, '[]'::jsonb,
    'P06.3 listByThread of an unknown thread is [] (not NULL)');

------------------------------------------------------------------------------
-- P07: listReclaimable({now 10000, ttlMs 5000}).
------------------------------------------------------------------------------
SELECT sandbox_persist.run_create_or_resume('{"runId":"rc-included","threadId":"rc-t","startedAt":1}');
SELECT sandbox_persist.run_update('rc-included', '{"detachedSince":1000}');
SELECT sandbox_persist.run_create_or_resume('{"runId":"rc-boundary","threadId":"rc-t","startedAt":1}');
SELECT sandbox_persist.run_update('rc-boundary', '{"detachedSince":5000}');
SELECT sandbox_persist.run_create_or_resume('{"runId":"rc-too-recent","threadId":"rc-t","startedAt":1}');
SELECT sandbox_persist.run_update('rc-too-recent', '{"detachedSince":5001}');
SELECT sandbox_persist.run_create_or_resume('{"runId":"rc-completed","threadId":"rc-t","startedAt":1}');
SELECT sandbox_persist.run_update('rc-completed', '{"detachedSince":1000,"status":"completed","finishedAt":2000}');
SELECT sandbox_persist.run_create_or_resume('{"runId":"rc-never-detached","threadId":"rc-t","startedAt":1}');

SELECT is(ARRAY(SELECT x FROM unnest(pg_temp.ids(sandbox_persist.run_list_reclaimable(10000, 5000))) x
                WHERE x LIKE 'rc-%' ORDER BY x COLLATE "C"),
    ARRAY['rc-boundary', 'rc-included'],
    'P07.1 exactly rc-boundary (5000, inclusive cutoff) and rc-included (1000) are reclaimable');
SELECT is(pg_temp.ids(sandbox_persist.run_list_reclaimable(10000, 5000)),
    ARRAY['rc-included', 'rc-boundary'],
    'P07.2 sandbox_persist lists the oldest detachedSince first');
SELECT is((sandbox_persist.run_list_reclaimable(10000, 5000)->0)::jsonb,
    '{"runId":"rc-included","threadId":"rc-t","status":"running","startedAt":1,"detachedSince":1000}'::jsonb,
    'P07.3 listed elements are complete run records');

SELECT sandbox_persist.run_create_or_resume('{"runId":"rc-zero-ttl","threadId":"rc-t","startedAt":1}');
SELECT sandbox_persist.run_update('rc-zero-ttl', '{"detachedSince":10000}');
SELECT is((SELECT (e->>'detachedSince')::bigint
           FROM json_array_elements(sandbox_persist.run_list_reclaimable(10000, 0)) e
           WHERE e->>'runId' = 'rc-zero-ttl'),
    10000::bigint,
    'P07.4 ttl 0 returns a run detached at now, with detachedSince = now');

SELECT sandbox_persist.run_create_or_resume('{"runId":"rc-reattached","threadId":"rc-t","startedAt":1}');
SELECT sandbox_persist.run_update('rc-reattached', '{"detachedSince":1000}');
SELECT ok('rc-reattached' = ANY (pg_temp.ids(sandbox_persist.run_list_reclaimable(10000, 5000))),
    'P07.5 a run detached at 1000 is listed before it re-attaches');
SELECT sandbox_persist.run_update('rc-reattached', '{"detachedSince":null}');
SELECT ok(NOT 'rc-reattached' = ANY (pg_temp.ids(sandbox_persist.run_list_reclaimable(10000, 5000))),
    'P07.6 clearing detachedSince (explicit undefined -> JSON null) removes the run from the list');

SELECT sandbox_persist.run_create_or_resume(format('{"runId":"rc-term-%s","threadId":"rc-t","startedAt":1}', s)::json)
FROM unnest(ARRAY['completed', 'failed', 'aborted']) s;
SELECT sandbox_persist.run_update('rc-term-' || s,
    format('{"status":"%s","detachedSince":1000,"finishedAt":2000}', s)::json)
FROM unnest(ARRAY['completed', 'failed', 'aborted']) s;
SELECT is(ARRAY(SELECT x FROM unnest(pg_temp.ids(sandbox_persist.run_list_reclaimable(10000, 5000))) x
                WHERE x LIKE 'rc-term-%'),
    '{}'::text[],
    'P07.7 completed, failed and aborted detached runs are never listed');

SELECT sandbox_persist.run_create_or_resume('{"runId":"rc-interrupted","threadId":"rc-t","startedAt":1}');
SELECT sandbox_persist.run_update('rc-interrupted', '{"status":"interrupted","detachedSince":1000}');
SELECT ok(NOT 'rc-interrupted' = ANY (pg_temp.ids(sandbox_persist.run_list_reclaimable(10000, 5000))),
    'P07.8 an interrupted detached run is never listed');
SELECT is(ARRAY(SELECT x FROM unnest(pg_temp.ids(sandbox_persist.run_list_reclaimable(10000, 5000))) x
                ORDER BY x COLLATE "C"),
    ARRAY['rc-boundary', 'rc-included'],
    'P07.9 after all fixtures, exactly rc-boundary and rc-included are reclaimable');
SELECT is(sandbox_persist.run_list_reclaimable(0, 5000)::jsonb, '[]'::jsonb,
    'P07.10 listReclaimable with nothing due returns [] (not NULL)');
SELECT is((SELECT count(*) FROM sandbox_persist.runs WHERE status = 'running' AND detached_since IS NOT NULL),
    4::bigint,
    'P07.11 listReclaimable is a query: the detached running runs are still there, unchanged');

------------------------------------------------------------------------------
-- D1: durable run fields (empty database, run fc-1).
------------------------------------------------------------------------------
SELECT sandbox_persist._reset_for_tests();
SELECT sandbox_persist.run_create_or_resume('{"runId":"fc-1","threadId":"fc-t","startedAt":1}');

SELECT is(sandbox_persist.run_get('fc-1')::jsonb,
    '{"runId":"fc-1","threadId":"fc-t","status":"running","startedAt":1}'::jsonb,
    'D1.0 a fresh run has sandboxKey, detachedSince, cancelRequested, driverEpoch all absent');

SELECT sandbox_persist.run_update('fc-1',
    '{"sandboxKey":"sandbox-abc","detachedSince":500,"cancelRequested":true,"driverEpoch":1}');
SELECT is(sandbox_persist.run_get('fc-1')::jsonb,
    '{"runId":"fc-1","threadId":"fc-t","status":"running","startedAt":1,
      "sandboxKey":"sandbox-abc","detachedSince":500,"cancelRequested":true,"driverEpoch":1}'::jsonb,
    'D1.1 sandbox-abc, 500, true, 1 read back exactly');

SELECT sandbox_persist.run_update('fc-1', '{"driverEpoch":2}');
SELECT is(sandbox_persist.run_get('fc-1')::jsonb,
    '{"runId":"fc-1","threadId":"fc-t","status":"running","startedAt":1,
      "sandboxKey":"sandbox-abc","detachedSince":500,"cancelRequested":true,"driverEpoch":2}'::jsonb,
    'D1.2 {driverEpoch: 2} gives 2; sandboxKey and cancelRequested untouched');

SELECT sandbox_persist.run_update('fc-1', '{"detachedSince":null}');
SELECT is(sandbox_persist.run_get('fc-1')::jsonb,
    '{"runId":"fc-1","threadId":"fc-t","status":"running","startedAt":1,
      "sandboxKey":"sandbox-abc","cancelRequested":true,"driverEpoch":2}'::jsonb,
    'D1.3 {detachedSince: undefined} clears it (key absent); the other three keep their values');

SELECT sandbox_persist.run_update('fc-1', '{"cancelRequested":false}');
SELECT is(sandbox_persist.run_get('fc-1')::jsonb,
    '{"runId":"fc-1","threadId":"fc-t","status":"running","startedAt":1,
      "sandboxKey":"sandbox-abc","cancelRequested":false,"driverEpoch":2}'::jsonb,
    'D1.4 {cancelRequested: false} reads back false, not absent');

SELECT sandbox_persist.run_update('fc-1',
    '{"sandboxKey":"sandbox-xyz","detachedSince":900,"cancelRequested":true,"driverEpoch":3}');
SELECT is(sandbox_persist.run_get('fc-1')::jsonb,
    '{"runId":"fc-1","threadId":"fc-t","status":"running","startedAt":1,
      "sandboxKey":"sandbox-xyz","detachedSince":900,"cancelRequested":true,"driverEpoch":3}'::jsonb,
    'D1.5 sandbox-xyz, 900, true, 3 are set before the full clear');
SELECT sandbox_persist.run_update('fc-1',
    '{"sandboxKey":null,"detachedSince":null,"cancelRequested":null,"driverEpoch":null}');
SELECT is(sandbox_persist.run_get('fc-1')::jsonb,
    '{"runId":"fc-1","threadId":"fc-t","status":"running","startedAt":1}'::jsonb,
    'D1.5 all four set to undefined clear all four; the run is still running with startedAt 1');

------------------------------------------------------------------------------
-- K1: a non-increasing driverEpoch is refused and nothing of the patch applies.
------------------------------------------------------------------------------
SELECT sandbox_persist._reset_for_tests();
SELECT sandbox_persist.run_create_or_resume('{"runId":"k-1","threadId":"k-t","startedAt":1}');
SELECT sandbox_persist.run_update('k-1', '{"driverEpoch":5,"sandboxKey":"sk-1"}');

SELECT * FROM pg_temp.rejects_sp($$SELECT sandbox_persist.run_update('k-1',
        '{"status":"completed","finishedAt":9,"sandboxKey":"sk-2","driverEpoch":5}')$$,
    'SP201', 'RUN_EPOCH_NOT_INCREASING', 'K1.1 driverEpoch equal to the stored epoch');
SELECT * FROM pg_temp.rejects_sp($$SELECT sandbox_persist.run_update('k-1',
        '{"detachedSince":7,"usage":{"a":1},"driverEpoch":4}')$$,
    'SP201', 'RUN_EPOCH_NOT_INCREASING', 'K1.2 driverEpoch below the stored epoch');
SELECT matches((pg_temp.attempt($$SELECT sandbox_persist.run_update('k-1', '{"driverEpoch":4}')$$))[3],
    '^[A-Z][^:]*[a-z ][^:]*\.$',
    'K1.3 the SP201 errdetail is a full sentence, not prefixed by the code name (the SQLSTATE carries it)');
SELECT is((pg_temp.attempt($$SELECT sandbox_persist.run_update('k-1', '{"driverEpoch":4}')$$))[5],
    (SELECT c->>'hint' FROM json_array_elements(sandbox_persist.error_codes()) c WHERE c->>'sqlstate' = 'SP201'),
    'K1.3b the SP201 error carries the error table''s hint (what the caller can do)');
SELECT is(sandbox_persist.run_get('k-1')::jsonb,
    '{"runId":"k-1","threadId":"k-t","status":"running","startedAt":1,"sandboxKey":"sk-1","driverEpoch":5}'::jsonb,
    'K1.4 no field of a refused patch is applied');
SELECT * FROM pg_temp.rejects_sp($$SELECT sandbox_persist.run_update('k-1',
        '{"status":"aborted","cancelRequested":true,"driverEpoch":0}')$$,
    'SP201', 'RUN_EPOCH_NOT_INCREASING', 'K1.5 driverEpoch 0 over a stored 5');
SELECT is(sandbox_persist.run_update('k-1', '{"driverEpoch":6,"sandboxKey":"sk-3"}'), true,
    'K1.6 a greater driverEpoch is accepted');
SELECT is(sandbox_persist.run_get('k-1')::jsonb,
    '{"runId":"k-1","threadId":"k-t","status":"running","startedAt":1,"sandboxKey":"sk-3","driverEpoch":6}'::jsonb,
    'K1.7 the accepted patch is applied whole');
SELECT sandbox_persist.run_create_or_resume('{"runId":"k-1z","threadId":"k-t","startedAt":1}');
SELECT sandbox_persist.run_update('k-1z', '{"driverEpoch":0}');
SELECT * FROM pg_temp.rejects_sp($$SELECT sandbox_persist.run_update('k-1z', '{"driverEpoch":0}')$$,
    'SP201', 'RUN_EPOCH_NOT_INCREASING', 'K1.8 a stored epoch of 0 is non-null: writing 0 again');
SELECT is(sandbox_persist.run_get('k-1z')->>'driverEpoch', '0',
    'K1.9 the stored epoch 0 is kept after the refusal');

------------------------------------------------------------------------------
-- K2: setting over an absent epoch, clearing, and setting after a clear.
------------------------------------------------------------------------------
SELECT sandbox_persist.run_create_or_resume('{"runId":"k-2a","threadId":"k-t","startedAt":1}');
SELECT sandbox_persist.run_create_or_resume('{"runId":"k-2b","threadId":"k-t","startedAt":1}');
SELECT lives_ok($$SELECT sandbox_persist.run_update('k-2a', '{"driverEpoch":0}')$$,
    'K2.1 driverEpoch 0 over an absent epoch is accepted');
SELECT is((sandbox_persist.run_get('k-2a')->>'driverEpoch'), '0',
    'K2.2 the epoch reads back as 0');
SELECT lives_ok($$SELECT sandbox_persist.run_update('k-2b', '{"driverEpoch":7}')$$,
    'K2.3 driverEpoch 7 over an absent epoch is accepted');
SELECT lives_ok($$SELECT sandbox_persist.run_update('k-2b', '{"driverEpoch":null}')$$,
    'K2.4 clearing a stored epoch is accepted');
SELECT ok(NOT sandbox_persist.run_get('k-2b')::jsonb ? 'driverEpoch',
    'K2.5 after the clear driverEpoch is absent');
SELECT lives_ok($$SELECT sandbox_persist.run_update('k-2b', '{"driverEpoch":3}')$$,
    'K2.6 after a clear a smaller value (3 < 7) is accepted');
SELECT is((sandbox_persist.run_get('k-2b')->>'driverEpoch'), '3',
    'K2.7 the epoch reads back as 3');
SELECT is(sandbox_persist.run_update('k-absent', '{"driverEpoch":0}'), false,
    'K2.8 an epoch patch on an unknown run is a no-op returning false');
SELECT ok(sandbox_persist.run_get('k-absent') IS NULL,
    'K2.9 the epoch patch on an unknown run created nothing');

------------------------------------------------------------------------------
-- R29: JSON null clears finishedAt, error and usage; error and usage are
-- replaced whole.
------------------------------------------------------------------------------
SELECT sandbox_persist.run_create_or_resume('{"runId":"r29","threadId":"r29-t","startedAt":5}');
SELECT sandbox_persist.run_update('r29',
    '{"status":"failed","finishedAt":100,"error":{"message":"m","code":"c"},"usage":{"promptTokens":1}}');
SELECT sandbox_persist.run_update('r29', '{"finishedAt":null}');
SELECT is(sandbox_persist.run_get('r29')::jsonb,
    '{"runId":"r29","threadId":"r29-t","status":"failed","startedAt":5,
      "error":{"message":"m","code":"c"},"usage":{"promptTokens":1}}'::jsonb,
    'R29.1 finishedAt: null clears finishedAt and leaves error and usage');
SELECT sandbox_persist.run_update('r29', '{"error":null}');
SELECT is(sandbox_persist.run_get('r29')::jsonb,
    '{"runId":"r29","threadId":"r29-t","status":"failed","startedAt":5,"usage":{"promptTokens":1}}'::jsonb,
    'R29.2 error: null clears error');
SELECT sandbox_persist.run_update('r29', '{"usage":null}');
SELECT is(sandbox_persist.run_get('r29')::jsonb,
    '{"runId":"r29","threadId":"r29-t","status":"failed","startedAt":5}'::jsonb,
    'R29.3 usage: null clears usage');
SELECT sandbox_persist.run_update('r29', '{"error":{"message":"a","code":"c1"}}');
SELECT sandbox_persist.run_update('r29', '{"error":{"message":"b"}}');
SELECT is((sandbox_persist.run_get('r29')->'error')::text, '{"message":"b"}',
    'R29.4 a new error without code removes the old code (error written as one unit)');
SELECT sandbox_persist.run_update('r29', '{"usage":{"promptTokens":1,"completionTokens":2}}');
SELECT sandbox_persist.run_update('r29', '{"usage":{"totalTokens":3}}');
SELECT is((sandbox_persist.run_get('r29')->'usage')::text, '{"totalTokens":3}',
    'R29.5 usage is replaced whole, never merged or summed');
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.run_update('r29', '{"status":null}')$$,
    '22004', 'R29.6 status cannot be cleared (status: null)');
SELECT lives_ok($$SELECT sandbox_persist.run_update('r29', '{}')$$,
    'R29.7 an empty patch is accepted');
SELECT is(sandbox_persist.run_get('r29')::jsonb,
    '{"runId":"r29","threadId":"r29-t","status":"failed","startedAt":5,"error":{"message":"b"},
      "usage":{"totalTokens":3}}'::jsonb,
    'R29.8 an empty patch changes nothing');

------------------------------------------------------------------------------
-- R34 (runs part): equal startedAt -> insertion order.
------------------------------------------------------------------------------
SELECT sandbox_persist.run_create_or_resume(format('{"runId":"%s","threadId":"r34-t","startedAt":5}', id)::json)
FROM unnest(ARRAY['r34-z', 'r34-m', 'r34-a']) WITH ORDINALITY AS t(id, n) ORDER BY n;
SELECT sandbox_persist.run_create_or_resume('{"runId":"r34-early","threadId":"r34-t","startedAt":4}');
-- Move r34-z's tuple to the end of the heap: an update must not change its place.
SELECT sandbox_persist.run_update('r34-z', '{"usage":{"n":1}}');
SELECT is(sandbox_persist.run_find_active_run('r34-t')->>'runId', 'r34-z',
    'R34.1 findActiveRun with equal startedAt returns the earliest inserted run');
SELECT is(pg_temp.ids(sandbox_persist.run_list_by_thread('r34-t')),
    ARRAY['r34-early', 'r34-z', 'r34-m', 'r34-a'],
    'R34.2 listByThread keeps insertion order among equal startedAt (after startedAt 4)');
SELECT sandbox_persist.run_update('r34-z', '{"status":"completed"}');
SELECT is(sandbox_persist.run_find_active_run('r34-t')->>'runId', 'r34-m',
    'R34.3 when the earliest completes, the next inserted running run is returned');
SELECT is(pg_temp.ids(sandbox_persist.run_list_by_thread('r34-t')),
    ARRAY['r34-early', 'r34-z', 'r34-m', 'r34-a'],
    'R34.4 listByThread lists every status and keeps the order after updates');

------------------------------------------------------------------------------
-- S20: a run never detached is not reclaimable for ttl 0, -1, 2^53 - 1.
------------------------------------------------------------------------------
SELECT sandbox_persist._reset_for_tests();
SELECT sandbox_persist.run_create_or_resume('{"runId":"s20-never","threadId":"s20-t","startedAt":1}');
SELECT sandbox_persist.run_create_or_resume('{"runId":"s20-detached","threadId":"s20-t","startedAt":1}');
SELECT sandbox_persist.run_update('s20-detached', '{"detachedSince":10000}');
SELECT is(pg_temp.ids(sandbox_persist.run_list_reclaimable(10000, 0)), ARRAY['s20-detached'],
    'S20.1 ttl 0: the never-detached run is not listed (the one detached at now is)');
SELECT is(pg_temp.ids(sandbox_persist.run_list_reclaimable(10000, -1)), ARRAY['s20-detached'],
    'S20.2 ttl -1: the never-detached run is not listed');
SELECT is(pg_temp.ids(sandbox_persist.run_list_reclaimable(10000, 9007199254740991)), '{}'::text[],
    'S20.3 ttl 2^53 - 1: nothing is listed');
SELECT is(pg_temp.ids(sandbox_persist.run_list_reclaimable(9223372036854775807, 0)), ARRAY['s20-detached'],
    'S20.4 now = max bigint, ttl 0: the never-detached run is still not listed');

------------------------------------------------------------------------------
-- V: bad input. Fixture run v-run; creates use new ids so a wrongly accepted
-- call would change the state.
------------------------------------------------------------------------------
SELECT sandbox_persist._reset_for_tests();
SELECT sandbox_persist.run_create_or_resume('{"runId":"v-run","threadId":"v-t","startedAt":100}');
SELECT sandbox_persist.run_update('v-run',
    '{"sandboxKey":"sk","driverEpoch":2,"usage":{"promptTokens":1},"error":{"message":"e"}}');

-- V1 malformed JSON text
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.run_create_or_resume('{"runId":"v-new","threadId":')$$,
    '22P02', 'V1.1 malformed JSON input to run_create_or_resume');
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.run_update('v-run', '{"status":"completed",}')$$,
    '22P02', 'V1.2 malformed JSON patch to run_update');

-- V2 record or patch that is not an object
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.run_create_or_resume('[{"runId":"v-new","threadId":"v-t","startedAt":1}]')$$,
    '22023', 'V2.1 createOrResume input given as a JSON array');
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.run_create_or_resume('"v-new"')$$,
    '22023', 'V2.2 createOrResume input given as a JSON string');
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.run_update('v-run', '[{"status":"completed"}]')$$,
    '22023', 'V2.3 update patch given as a JSON array');
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.run_update('v-run', '42')$$,
    '22023', 'V2.4 update patch given as a JSON number');

-- V3 wrong JSON types
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.run_create_or_resume('{"runId":"v-new","threadId":"v-t","startedAt":"1000"}')$$,
    '22023', 'V3.1 startedAt "1000" (a string)');
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.run_create_or_resume('{"runId":"v-new","threadId":7,"startedAt":1000}')$$,
    '22023', 'V3.2 threadId 7 (a number)');
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.run_create_or_resume('{"runId":["v-new"],"threadId":"v-t","startedAt":1000}')$$,
    '22023', 'V3.3 runId given as an array');
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.run_create_or_resume('{"runId":"v-new","threadId":"v-t","startedAt":1000,"status":1}')$$,
    '22023', 'V3.4 status given as a number in createOrResume');
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.run_update('v-run', '{"status":"completed","finishedAt":"2000"}')$$,
    '22023', 'V3.5 patch finishedAt "2000" (a string)');
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.run_update('v-run', '{"sandboxKey":5}')$$,
    '22023', 'V3.6 patch sandboxKey 5 (a number)');
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.run_update('v-run', '{"cancelRequested":"true"}')$$,
    '22023', 'V3.7 patch cancelRequested "true" (a string)');
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.run_update('v-run', '{"cancelRequested":1}')$$,
    '22023', 'V3.8 patch cancelRequested 1 (a number, not a boolean)');
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.run_update('v-run', '{"detachedSince":true}')$$,
    '22023', 'V3.9 patch detachedSince true (a boolean)');
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.run_update('v-run', '{"usage":[1,2]}')$$,
    '22023', 'V3.10 patch usage given as an array (must be an object)');
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.run_update('v-run', '{"usage":"lots"}')$$,
    '22023', 'V3.11 patch usage given as a string');
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.run_update('v-run', '{"driverEpoch":"3"}')$$,
    '22023', 'V3.12 patch driverEpoch "3" (a string)');
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.run_update('v-run', '{"status":["completed"]}')$$,
    '22023', 'V3.13 patch status given as an array');

-- V4 SQL NULL for a required argument
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.run_get(NULL)$$,
    '22004', 'V4.1 run_get(NULL)');
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.run_create_or_resume(NULL)$$,
    '22004', 'V4.2 run_create_or_resume(NULL)');
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.run_update(NULL, '{"status":"completed"}')$$,
    '22004', 'V4.3 run_update(NULL, patch)');
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.run_update('v-run', NULL)$$,
    '22004', 'V4.4 run_update(id, NULL)');
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.run_find_active_run(NULL)$$,
    '22004', 'V4.5 run_find_active_run(NULL)');
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.run_list_by_thread(NULL)$$,
    '22004', 'V4.6 run_list_by_thread(NULL)');
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.run_list_reclaimable(NULL, 0)$$,
    '22004', 'V4.7 run_list_reclaimable(NULL, ttl)');
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.run_list_reclaimable(10000, NULL)$$,
    '22004', 'V4.8 run_list_reclaimable(now, NULL)');

-- V5 required key absent or JSON null
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.run_create_or_resume('{"runId":"v-new","startedAt":1000}')$$,
    '22004', 'V5.1 threadId absent');
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.run_create_or_resume('{"runId":"v-new","threadId":null,"startedAt":1000}')$$,
    '22004', 'V5.2 threadId JSON null');
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.run_create_or_resume('{"threadId":"v-t","startedAt":1000}')$$,
    '22004', 'V5.3 runId absent');
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.run_create_or_resume('{"runId":"v-new","threadId":"v-t"}')$$,
    '22004', 'V5.4 startedAt absent');
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.run_create_or_resume('{"runId":"v-new","threadId":"v-t","startedAt":null}')$$,
    '22004', 'V5.5 startedAt JSON null (NaN/Infinity from JSON.stringify)');
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.run_create_or_resume('{"runId":null,"threadId":"v-t","startedAt":1000}')$$,
    '22004', 'V5.6 runId JSON null');

-- V6 unknown keys (the message names the key)
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.run_update('v-run', '{"status":"completed","detached_since":5}')$$,
    '22023', 'V6.1 unknown patch key detached_since', 'detached_since');
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.run_create_or_resume('{"runId":"v-new","threadId":"v-t","startedAt":1000,"detached_since":5}')$$,
    '22023', 'V6.2 unknown createOrResume key detached_since', 'detached_since');
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.run_create_or_resume('{"runId":"v-new","threadId":"v-t","startedAt":1000,"finishedAt":5}')$$,
    '22023', 'V6.3 finishedAt is not a createOrResume key', 'finishedAt');
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.run_update('v-run', '{"sandboxKey":"sk-new","startedAt":5}')$$,
    '22023', 'V6.4 startedAt is not a patch key', 'startedAt');
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.run_update('v-run', '{"threadId":"other"}')$$,
    '22023', 'V6.5 threadId is not a patch key', 'threadId');
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.run_update('v-run', '{"runId":"v-run","status":"completed"}')$$,
    '22023', 'V6.6 runId is not a patch key', 'runId');
SELECT is(sandbox_persist.run_create_or_resume('{"run\u0049d":"v-esc","threadId":"v-t","startedAt":1}')->>'runId',
    'v-esc',
    'V6.7 (control) an escaped member name (run\u0049d) is the key runId, not an unknown key');

-- V7 unknown status
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.run_update('v-run', '{"status":"canceled"}')$$,
    '22023', 'V7.1 patch status canceled');
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.run_update('v-run', '{"status":"done"}')$$,
    '22023', 'V7.2 patch status done');
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.run_update('v-run', '{"status":"RUNNING"}')$$,
    '22023', 'V7.3 patch status RUNNING (case matters)');
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.run_create_or_resume('{"runId":"v-new","threadId":"v-t","startedAt":1000,"status":"canceled"}')$$,
    '22023', 'V7.4 createOrResume status canceled');
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.run_create_or_resume('{"runId":"v-new","threadId":"v-t","startedAt":1000,"status":""}')$$,
    '22023', 'V7.5 createOrResume status empty string');

-- V8 status: null in a patch
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.run_update('v-run', '{"status":null,"sandboxKey":"sk-new"}')$$,
    '22004', 'V8.1 status: null in a run patch');

-- V9 fractional integers (never rounded)
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.run_create_or_resume('{"runId":"v-new","threadId":"v-t","startedAt":1000.5}')$$,
    '22023', 'V9.1 startedAt 1000.5');
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.run_update('v-run', '{"finishedAt":2000.5}')$$,
    '22023', 'V9.2 patch finishedAt 2000.5');
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.run_update('v-run', '{"detachedSince":0.1}')$$,
    '22023', 'V9.3 patch detachedSince 0.1');
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.run_update('v-run', '{"driverEpoch":3.5}')$$,
    '22023', 'V9.4 patch driverEpoch 3.5');
-- Fractions that a double cannot represent must not be rounded to an integer either.
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.run_create_or_resume('{"runId":"v-new","threadId":"v-t","startedAt":9007199254740990.9}')$$,
    '22023', 'V9.5 startedAt 9007199254740990.9 (within range, fractional)');
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.run_update('v-run', '{"finishedAt":1000.0000000000000001}')$$,
    '22023', 'V9.6 patch finishedAt 1000.0000000000000001');
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.run_update('v-run', '{"detachedSince":1e-400}')$$,
    '22023', 'V9.7 patch detachedSince 1e-400 (a positive fraction)');
SELECT is(sandbox_persist.run_create_or_resume(
        '{"runId":"v-exp","threadId":"v-t","startedAt":15e2}')->>'startedAt',
    '1500',
    'V9.8 (control) an integral value in exponent form (15e2) is accepted as 1500');

-- V10 integers beyond +/-(2^53 - 1)
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.run_create_or_resume('{"runId":"v-new","threadId":"v-t","startedAt":9007199254740992}')$$,
    '22003', 'V10.1 startedAt 2^53');
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.run_create_or_resume('{"runId":"v-new","threadId":"v-t","startedAt":-9007199254740992}')$$,
    '22003', 'V10.2 startedAt -2^53');
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.run_update('v-run', '{"detachedSince":100000000000000000000}')$$,
    '22003', 'V10.3 patch detachedSince 1e20 written out');
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.run_update('v-run', '{"finishedAt":1e+21}')$$,
    '22003', 'V10.4 patch finishedAt 1e+21 (JSON.stringify of 1e21)');
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.run_update('v-run', '{"driverEpoch":9007199254740992}')$$,
    '22003', 'V10.5 patch driverEpoch 2^53');
SELECT is(sandbox_persist.run_create_or_resume(
        '{"runId":"v-max","threadId":"v-t","startedAt":9007199254740991}')->>'startedAt',
    '9007199254740991',
    'V10.6 startedAt 2^53 - 1 is accepted and reads back exactly');
SELECT is(sandbox_persist.run_create_or_resume(
        '{"runId":"v-min","threadId":"v-t","startedAt":-9007199254740991}')->>'startedAt',
    '-9007199254740991',
    'V10.7 startedAt -(2^53 - 1) is accepted and reads back exactly');

-- V11 negative driverEpoch
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.run_update('v-run', '{"driverEpoch":-1}')$$,
    '22003', 'V11.1 patch driverEpoch -1');
SELECT sandbox_persist.run_create_or_resume('{"runId":"v-noepoch","threadId":"v-t","startedAt":1}');
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.run_update('v-noepoch', '{"driverEpoch":-5}')$$,
    '22003', 'V11.2 patch driverEpoch -5 over an absent epoch');

-- V13 U+0000 in structural ids inside JSON; accepted and preserved in opaque payloads
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.run_create_or_resume('{"runId":"v-a\u0000b","threadId":"v-t","startedAt":1}')$$,
    '22021', 'V13.1 runId containing \u0000');
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.run_create_or_resume('{"runId":"v-new","threadId":"\u0000","startedAt":1}')$$,
    '22021', 'V13.2 threadId \u0000');
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.run_update('v-run', '{"sandboxKey":"sk\u0000"}')$$,
    '22021', 'V13.3 patch sandboxKey containing \u0000');
SELECT lives_ok($$SELECT sandbox_persist.run_update('v-run',
        '{"error":{"message":"cat: \u0000\u0001 binary","code":"c\u0000"},"usage":{"n\u0000":"\u0000","n\u0000":2}}')$$,
    'V13.4 \u0000 inside a run error and usage (opaque) is accepted');
-- (json operators cannot extract from text holding \u0000: compare whole records)
SELECT is(sandbox_persist.run_get('v-run')::text,
    '{"runId":"v-run","threadId":"v-t","status":"running","startedAt":100,'
    '"error":{"message":"cat: \u0000\u0001 binary","code":"c\u0000"},"usage":{"n\u0000":"\u0000","n\u0000":2},'
    '"sandboxKey":"sk","driverEpoch":2}',
    'V13.5 error and usage with \u0000 and a duplicate key read back byte for byte (exact record text)');
SELECT ok(strpos(sandbox_persist.run_list_by_thread('v-t')::text,
        '"error":{"message":"cat: \u0000\u0001 binary","code":"c\u0000"},"usage":{"n\u0000":"\u0000","n\u0000":2}') > 0,
    'V13.6 listByThread splices the same error and usage text verbatim');
SELECT is(sandbox_persist.run_create_or_resume(
        '{"runId":"v-a\/b\"c\\d\n\u0001","threadId":"v-t","startedAt":1}')->>'runId',
    E'v-a/b"c\\d\n\x01',
    'V13.7 (control) escapes other than \u0000 (quote, backslash, newline, U+0001) decode and round-trip');
SELECT ok(sandbox_persist.run_get(E'v-a/b"c\\d\n\x01') IS NOT NULL,
    'V13.8 (control) that run is found under its decoded id');

-- V14 lone surrogate escapes in structural ids; preserved in opaque payloads
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.run_create_or_resume('{"runId":"\ud800","threadId":"v-t","startedAt":1}')$$,
    '22021', 'V14.1 runId \ud800 (lone high surrogate)');
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.run_create_or_resume('{"runId":"v-new","threadId":"a\udc00","startedAt":1}')$$,
    '22021', 'V14.2 threadId with a lone low surrogate');
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.run_create_or_resume('{"runId":"x\ude00\ud83d","threadId":"v-t","startedAt":1}')$$,
    '22021', 'V14.3 runId with a reversed surrogate pair');
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.run_update('v-run', '{"sandboxKey":"\udbff"}')$$,
    '22021', 'V14.4 patch sandboxKey with a lone surrogate');
SELECT is(sandbox_persist.run_create_or_resume(
        '{"runId":"v-\ud83d\ude00","threadId":"v-t","startedAt":1}')->>'runId',
    'v-😀',
    'V14.5 (control) a valid surrogate pair escape decodes to U+1F600');
SELECT ok(sandbox_persist.run_get('v-😀') IS NOT NULL,
    'V14.6 (control) the run is found under its decoded UTF-8 id');
SELECT lives_ok($$SELECT sandbox_persist.run_update('v-run', '{"usage":{"s":"\ud800","k\udfff":1}}')$$,
    'V14.7 a lone surrogate escape inside usage (opaque) is accepted');
SELECT is(sandbox_persist.run_get('v-run')::text,
    '{"runId":"v-run","threadId":"v-t","status":"running","startedAt":100,'
    '"error":{"message":"cat: \u0000\u0001 binary","code":"c\u0000"},"usage":{"s":"\ud800","k\udfff":1},'
    '"sandboxKey":"sk","driverEpoch":2}',
    'V14.8 usage with lone surrogate escapes reads back byte for byte (exact record text)');

-- V15 ids over 1024 UTF-8 bytes
SELECT * FROM pg_temp.rejects(format($$SELECT sandbox_persist.run_create_or_resume('{"runId":"%s","threadId":"v-t","startedAt":1}')$$, repeat('a', 1025)),
    '22001', 'V15.1 runId of 1025 bytes');
SELECT * FROM pg_temp.rejects(format($$SELECT sandbox_persist.run_create_or_resume('{"runId":"%s","threadId":"v-t","startedAt":1}')$$, repeat('é', 513)),
    '22001', 'V15.2 runId of 513 characters but 1026 bytes');
SELECT * FROM pg_temp.rejects(format($$SELECT sandbox_persist.run_create_or_resume('{"runId":"%s","threadId":"v-t","startedAt":1}')$$, repeat('\u00e9', 513)),
    '22001', 'V15.3 runId of 513 escaped \u00e9 (1026 decoded bytes)');
SELECT * FROM pg_temp.rejects(format($$SELECT sandbox_persist.run_create_or_resume('{"runId":"v-new","threadId":"%s","startedAt":1}')$$, repeat('t', 1025)),
    '22001', 'V15.4 threadId of 1025 bytes');
SELECT * FROM pg_temp.rejects(format($$SELECT sandbox_persist.run_get('%s')$$, repeat('a', 1025)),
    '22001', 'V15.5 run_get with a 1025-byte id');
SELECT * FROM pg_temp.rejects(format($$SELECT sandbox_persist.run_update('%s', '{"status":"completed"}')$$, repeat('a', 1025)),
    '22001', 'V15.6 run_update with a 1025-byte id');
SELECT * FROM pg_temp.rejects(format($$SELECT sandbox_persist.run_list_by_thread('%s')$$, repeat('a', 1025)),
    '22001', 'V15.7 run_list_by_thread with a 1025-byte id');
SELECT is(sandbox_persist.run_create_or_resume(
        format('{"runId":"%s","threadId":"v-t","startedAt":1}', repeat('\u00e9', 512))::json)->>'runId',
    repeat('é', 512),
    'V15.8 (control) a runId of 512 escaped \u00e9 (exactly 1024 decoded bytes) is accepted');
SELECT ok(sandbox_persist.run_get(repeat('é', 512)) IS NOT NULL,
    'V15.9 (control) a 1024-byte id is accepted by run_get');

-- V16 empty ids
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.run_create_or_resume('{"runId":"","threadId":"v-t","startedAt":1}')$$,
    '22023', 'V16.1 empty runId');
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.run_create_or_resume('{"runId":"v-new","threadId":"","startedAt":1}')$$,
    '22023', 'V16.2 empty threadId');
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.run_get('')$$,
    '22023', 'V16.3 run_get('''')');
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.run_update('', '{"status":"completed"}')$$,
    '22023', 'V16.4 run_update('''', patch)');
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.run_find_active_run('')$$,
    '22023', 'V16.5 run_find_active_run('''')');
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.run_list_by_thread('')$$,
    '22023', 'V16.6 run_list_by_thread('''')');

-- V20 malformed run error
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.run_update('v-run', '{"status":"failed","error":{"code":"c"}}')$$,
    '22023', 'V20.1 error without message');
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.run_update('v-run', '{"status":"failed","error":{"message":5}}')$$,
    '22023', 'V20.2 error with a numeric message');
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.run_update('v-run', '{"status":"failed","error":{"message":null}}')$$,
    '22023', 'V20.3 error with a null message');
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.run_update('v-run', '{"status":"failed","error":{"message":"x","stack":"..."}}')$$,
    '22023', 'V20.4 error with an extra key', 'stack');
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.run_update('v-run', '{"status":"failed","error":{"message":"x","code":7}}')$$,
    '22023', 'V20.5 error with a numeric code');
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.run_update('v-run', '{"status":"failed","error":"boom"}')$$,
    '22023', 'V20.6 error flattened to a string');

-- V26 caller_now_ms - ttl_ms overflow
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.run_list_reclaimable(-9223372036854775808, 1)$$,
    '22003', 'V26.1 now = min bigint, ttl 1');
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.run_list_reclaimable(9223372036854775807, -1)$$,
    '22003', 'V26.2 now = max bigint, ttl -1');
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.run_list_reclaimable(-2, 9223372036854775807)$$,
    '22003', 'V26.3 now -2, ttl max bigint');
SELECT lives_ok($$SELECT sandbox_persist.run_list_reclaimable(-1, 9223372036854775807)$$,
    'V26.4 (control) now -1, ttl max bigint gives exactly min bigint: no overflow');

SELECT * FROM finish();
ROLLBACK;
