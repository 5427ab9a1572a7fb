-- pgTAP: run updates that can be HOT (heap-only tuples), and the status clock
-- that keys the runs partial indexes since 0.3.0 (docs/architecture.md, "Run
-- rows and HOT updates"). Our own cases RU1-RU9; the contract's run cases are
-- in runs.sql and claims.sql, the maintenance ones in maintenance.sql.
--
-- HOT is read from the statistics of this transaction
-- (pg_stat_get_xact_tuples_updated / _hot_updated): the table is emptied
-- first, so the page of each new run has room for its next version.
--
-- Run with: pg_prove -d <db> test/pgtap/run_hot_updates.sql
-- (needs sandbox_persist.allow_test_reset and allow_client_clock on).
BEGIN;
SELECT plan(18);
SELECT sandbox_persist._reset_for_tests();
SET LOCAL sandbox_persist.allow_client_clock = on;

------------------------------------------------------------------------------
-- Helpers (temporary, gone at ROLLBACK).
------------------------------------------------------------------------------

-- Updates of runs in this transaction so far: "<all> <hot>".
CREATE FUNCTION pg_temp.upd() RETURNS int[] LANGUAGE sql AS $$
    SELECT ARRAY[pg_stat_get_xact_tuples_updated('sandbox_persist.runs'::regclass),
                 pg_stat_get_xact_tuples_hot_updated('sandbox_persist.runs'::regclass)]::int[]
$$;

-- How many updates and HOT updates a statement made: {all, hot}.
CREATE FUNCTION pg_temp.updates_by(stmt text) RETURNS int[] LANGUAGE plpgsql AS $$
DECLARE
    before int[] := pg_temp.upd();
    after int[];
BEGIN
    EXECUTE stmt;
    after := pg_temp.upd();
    RETURN ARRAY[after[1] - before[1], after[2] - before[2]];
END
$$;

CREATE FUNCTION pg_temp.clocks(id text) RETURNS bigint[] LANGUAGE sql AS $$
    SELECT ARRAY[changed_at, status_changed_at] FROM sandbox_persist.runs WHERE run_id = id
$$;

CREATE FUNCTION pg_temp.now_ms() RETURNS bigint LANGUAGE sql AS $$
    SELECT (extract(epoch FROM clock_timestamp()) * 1000)::bigint
$$;

------------------------------------------------------------------------------
-- RU1-RU3: the durable-field patches, a usage patch and a claim are HOT.
------------------------------------------------------------------------------
SELECT sandbox_persist.run_create_or_resume('{"runId":"ru-a","threadId":"ru-t","startedAt":1}');
SELECT is(pg_temp.updates_by($$SELECT sandbox_persist.run_update('ru-a', '{"driverEpoch":1}')$$),
    ARRAY[1, 1], 'RU1.1 a driverEpoch patch is one HOT update');
SELECT is(pg_temp.updates_by($$SELECT sandbox_persist.run_update('ru-a', '{"cancelRequested":false,"driverEpoch":2}')$$),
    ARRAY[1, 1], 'RU1.2 cancelRequested with driverEpoch: one HOT update');
SELECT is(pg_temp.updates_by($$SELECT sandbox_persist.run_update('ru-a', '{"usage":{"totalTokens":7},"error":{"message":"m"}}')$$),
    ARRAY[1, 1], 'RU2 a usage and error patch is one HOT update');
SELECT is(pg_temp.updates_by($$SELECT sandbox_persist.run_claim('ru-a')$$),
    ARRAY[1, 1], 'RU3 run_claim is one HOT update');

------------------------------------------------------------------------------
-- RU4-RU6: the status clock moves with the status only.
------------------------------------------------------------------------------
SELECT sandbox_persist.run_create_or_resume('{"runId":"ru-b","threadId":"ru-t","startedAt":1}');
SELECT ok((SELECT c[1] = c[2] FROM pg_temp.clocks('ru-b') c),
    'RU4.1 a new run: status_changed_at = changed_at');
UPDATE sandbox_persist.runs SET changed_at = changed_at - 5000, status_changed_at = status_changed_at - 5000
 WHERE run_id = 'ru-b';
SELECT pg_temp.clocks('ru-b') AS b0 \gset
SELECT sandbox_persist.run_update('ru-b', '{"detachedSince":3,"sandboxKey":"ru-sb","cancelRequested":true,"driverEpoch":4,"usage":{}}');
SELECT ok((SELECT c[1] > (:'b0'::bigint[])[1] AND c[2] = (:'b0'::bigint[])[2] FROM pg_temp.clocks('ru-b') c),
    'RU4.2 a patch of every durable field moves changed_at, not status_changed_at');
SELECT is(pg_temp.updates_by($$SELECT sandbox_persist.run_update('ru-b', '{"status":"running"}')$$),
    ARRAY[1, 1], 'RU5.1 re-sending the same status is a HOT update');
SELECT ok((SELECT c[2] = (:'b0'::bigint[])[2] FROM pg_temp.clocks('ru-b') c),
    'RU5.2 and keeps status_changed_at');
SELECT is(pg_temp.updates_by($$SELECT sandbox_persist.run_update('ru-b', '{"status":"completed","finishedAt":9}')$$),
    ARRAY[1, 0], 'RU6.1 a status change is an update that is not HOT (the partial indexes move)');
SELECT ok((SELECT c[1] = c[2] AND c[2] > (:'b0'::bigint[])[2] FROM pg_temp.clocks('ru-b') c),
    'RU6.2 a status change sets status_changed_at = changed_at');
SELECT is(sandbox_persist.run_get('ru-b')::jsonb,
    '{"runId":"ru-b","threadId":"ru-t","status":"completed","startedAt":1,"finishedAt":9,"usage":{},"sandboxKey":"ru-sb","detachedSince":3,"cancelRequested":true,"driverEpoch":4}'::jsonb,
    'RU6.3 the record reads back whole');

------------------------------------------------------------------------------
-- RU7: the epoch check of the one-statement patch.
------------------------------------------------------------------------------
SELECT throws_ok($$SELECT sandbox_persist.run_update('ru-a', '{"driverEpoch":3,"usage":{"x":1}}')$$,
    'SP201', NULL, 'RU7.1 an epoch not above the stored one is still SP201');
SELECT is((sandbox_persist.run_get('ru-a')->'usage')::jsonb, '{"totalTokens":7}'::jsonb,
    'RU7.2 and applies nothing');
SELECT is(sandbox_persist.run_update('ru-missing', '{"driverEpoch":3}'), false,
    'RU7.3 a missing run is still false');

------------------------------------------------------------------------------
-- RU8: retention (A6) bounds its scan by status_changed_at and decides by
-- changed_at: a run that went terminal long ago but was written recently is
-- kept until the write itself is old.
------------------------------------------------------------------------------
SELECT sandbox_persist._reset_for_tests();
SET LOCAL sandbox_persist.run_retention = '60s';
SELECT sandbox_persist.run_create_or_resume('{"runId":"ru-old","threadId":"ru-t","startedAt":1}');
SELECT sandbox_persist.run_update('ru-old', '{"status":"completed"}');
UPDATE sandbox_persist.runs SET status_changed_at = status_changed_at - 3600000 WHERE run_id = 'ru-old';
SELECT changed_at AS c0 FROM sandbox_persist.runs WHERE run_id = 'ru-old' \gset
SELECT is((sandbox_persist.maintain(1000, :c0 + 30000)->>'runsDeleted')::int, 0,
    'RU8.1 terminal for an hour, written 30 s ago, retention 60 s: kept');
SELECT is((sandbox_persist.maintain(1000, :c0 + 61000)->>'runsDeleted')::int, 1,
    'RU8.2 deleted once the last write is 61 s old');
RESET sandbox_persist.run_retention;

------------------------------------------------------------------------------
-- RU9: the schema: no index of runs reads changed_at; room for HOT on a page.
------------------------------------------------------------------------------
SELECT is((SELECT count(*)::int FROM pg_index i
            WHERE i.indrelid = 'sandbox_persist.runs'::regclass
              AND pg_get_indexdef(i.indexrelid) ~ '\mchanged_at\M'),
    0, 'RU9.1 no index of runs reads changed_at');
SELECT ok((SELECT reloptions @> ARRAY['fillfactor=90'] FROM pg_class
            WHERE oid = 'sandbox_persist.runs'::regclass),
    'RU9.2 runs has fillfactor 90');

SELECT * FROM finish();
ROLLBACK;
