-- pgTAP: the monitoring surface of 0.4.0 (docs/contract/maintenance.md §6,
-- docs/monitoring.md): metrics(), the overview columns it reads, the durable
-- lease-takeover counter, the GC backlog (_maintenance_backlog), the recorded
-- maintenance duration and grant_monitor_role. Cases MON1-MON10.
--
-- Clocks: leases and locks are acquired on an injected now_ms in the past to
-- make them expired; maintain() and the backlog take an injected now_ms.
--
-- Run with: pg_prove -d <db> test/pgtap/monitoring.sql
-- (needs sandbox_persist.allow_test_reset and allow_client_clock on).
BEGIN;
SELECT plan(52);
SELECT sandbox_persist._reset_for_tests();
SET LOCAL sandbox_persist.allow_client_clock = on;

CREATE FUNCTION pg_temp.now_ms() RETURNS bigint LANGUAGE sql AS $$
    SELECT (extract(epoch FROM clock_timestamp()) * 1000)::bigint
$$;
-- One sample of metrics(): the value of name with labels (NULL labels: none).
CREATE FUNCTION pg_temp.m(metric text, lbl jsonb DEFAULT '{}') RETURNS double precision
LANGUAGE sql AS $$
    SELECT value FROM sandbox_persist.metrics(ARRAY[metric]) WHERE labels::jsonb = lbl
$$;
CREATE FUNCTION pg_temp.run(id text, status text) RETURNS void LANGUAGE sql AS $$
    SELECT sandbox_persist.run_create_or_resume(json_build_object(
        'runId', id, 'threadId', 'thread-' || id, 'startedAt', 1, 'status', status))::text::void
$$;
CREATE FUNCTION pg_temp.takeovers(k text) RETURNS bigint LANGUAGE sql AS $$
    SELECT coalesce(sum(takeovers), 0)::bigint FROM sandbox_persist.lease_takeovers WHERE kind = k
$$;

-- MON1: the families, their types and help, units in the names.
SELECT is(ARRAY(SELECT DISTINCT name FROM sandbox_persist.metrics() ORDER BY name),
    ARRAY['sandbox_persist_attention_items', 'sandbox_persist_blob_raw_bytes',
          'sandbox_persist_blob_stored_bytes', 'sandbox_persist_blobs',
          'sandbox_persist_blobs_awaiting_gc', 'sandbox_persist_checkpoint_leases_held',
          'sandbox_persist_event_logs_open', 'sandbox_persist_event_logs_producer_lost',
          'sandbox_persist_gc_backlog_rows', 'sandbox_persist_lease_takeovers_total',
          'sandbox_persist_locks_held', 'sandbox_persist_maintenance_last_duration_seconds',
          'sandbox_persist_maintenance_last_run_age_seconds', 'sandbox_persist_runs',
          'sandbox_persist_runs_detached', 'sandbox_persist_runs_detached_past_ttl',
          'sandbox_persist_table_size_bytes', 'sandbox_persist_uploads_open'],
    'MON1 metrics() lists every family');
SELECT is((SELECT count(*)::int FROM sandbox_persist.metrics()
            WHERE type NOT IN ('gauge', 'counter') OR help IS NULL OR help = ''
               OR name !~ '^sandbox_persist_[a-z_]+$' OR json_typeof(labels) <> 'object'),
    0, 'MON1.1 every sample has a gauge or counter type, help, a snake_case name and a labels object');
SELECT is(ARRAY(SELECT DISTINCT name FROM sandbox_persist.metrics() WHERE type = 'counter'),
    ARRAY['sandbox_persist_lease_takeovers_total'],
    'MON1.2 the one counter ends in _total');
SELECT is((SELECT count(*)::int FROM sandbox_persist.metrics() m
            WHERE name = 'sandbox_persist_runs'),
    5, 'MON1.3 one runs sample per status');
SELECT is((SELECT count(DISTINCT (name, labels::text))::int FROM sandbox_persist.metrics()),
    (SELECT count(*)::int FROM sandbox_persist.metrics()),
    'MON1.4 no sample repeats a name and labels');

-- MON2: on an empty database, never-run maintenance is +Inf old, duration NaN.
SELECT is(pg_temp.m('sandbox_persist_maintenance_last_run_age_seconds'), 'Infinity'::float8,
    'MON2 maintenance never run: age +Inf');
SELECT ok(pg_temp.m('sandbox_persist_maintenance_last_duration_seconds') = 'NaN'::float8,
    'MON2.1 and duration NaN');

-- The fixture: runs of every status, detached runs, leases and locks (held,
-- expired, taken over), open and producer-lost logs, blobs and an upload.
SET LOCAL sandbox_persist.reaper_ttl = '60s';
SELECT pg_temp.run('r-run-1', 'running'), pg_temp.run('r-run-2', 'running'),
       pg_temp.run('r-run-3', 'running'), pg_temp.run('r-int', 'interrupted'),
       pg_temp.run('r-done-1', 'completed'), pg_temp.run('r-done-2', 'completed'),
       pg_temp.run('r-fail', 'failed'), pg_temp.run('r-abort', 'aborted');
SELECT sandbox_persist.run_update('r-run-1', json_build_object('detachedSince', pg_temp.now_ms() - 120000)),
       sandbox_persist.run_update('r-run-2', json_build_object('detachedSince', pg_temp.now_ms() - 1000));

SELECT is(ARRAY(SELECT value FROM sandbox_persist.metrics('{sandbox_persist_runs}')
                 ORDER BY labels->>'status'),
    ARRAY[1, 2, 1, 1, 3]::float8[], 'MON3 runs by status (aborted, completed, failed, interrupted, running)');
SELECT is(pg_temp.m('sandbox_persist_runs_detached'), 2::float8, 'MON3.1 detached runs');
SELECT is(pg_temp.m('sandbox_persist_runs_detached_past_ttl'), 1::float8,
    'MON3.2 detached runs past reaper_ttl');
SET LOCAL sandbox_persist.reaper_ttl = 0;
SELECT is(pg_temp.m('sandbox_persist_runs_detached_past_ttl'), 0::float8,
    'MON3.3 none past the TTL while reaper_ttl is 0');

-- MON4: the takeover counter, checkpoint writer leases.
SELECT sandbox_persist.checkpoint_acquire_writer('mon-t1', 60000);
SELECT sandbox_persist.checkpoint_acquire_writer('mon-t2', 1000, pg_temp.now_ms() - 10000);
SELECT is(pg_temp.takeovers('checkpoint_writer'), 0::bigint, 'MON4 first acquires are no takeovers');
SELECT throws_ok($$SELECT sandbox_persist.checkpoint_acquire_writer('mon-t1', 60000)$$, 'SP005', NULL,
    'MON4.1 a live lease is refused');
SELECT is(pg_temp.takeovers('checkpoint_writer'), 0::bigint, 'MON4.2 and not counted');
SELECT is(pg_temp.m('sandbox_persist_checkpoint_leases_held'), 1::float8,
    'MON4.3 one lease held, the expired one not');
SELECT ok(sandbox_persist.checkpoint_acquire_writer('mon-t2', 60000) IS NOT NULL,
    'MON4.4 the expired lease is taken over');
SELECT is(pg_temp.takeovers('checkpoint_writer'), 1::bigint, 'MON4.5 and counted once');
SELECT is(pg_temp.m('sandbox_persist_lease_takeovers_total', '{"kind":"checkpoint_writer"}'), 1::float8,
    'MON4.6 metrics() shows it');
SELECT ok(sandbox_persist.checkpoint_release_writer(sandbox_persist.checkpoint_acquire_writer('mon-t3', 60000)),
    'MON4.7 acquire and release a third thread');
SELECT ok(sandbox_persist.checkpoint_acquire_writer('mon-t3', 60000) IS NOT NULL,
    'MON4.8 acquire after a release');
SELECT is(pg_temp.takeovers('checkpoint_writer'), 1::bigint, 'MON4.9 is no takeover');
SAVEPOINT rolled;
SELECT sandbox_persist.checkpoint_acquire_writer('mon-t4', 1000, pg_temp.now_ms() - 10000);
SELECT sandbox_persist.checkpoint_acquire_writer('mon-t4', 60000);
ROLLBACK TO SAVEPOINT rolled;
SELECT is(pg_temp.takeovers('checkpoint_writer'), 1::bigint, 'MON4.10 a takeover that rolls back is not counted');

-- MON5: the takeover counter, locks.
SELECT sandbox_persist.lock_acquire('mon-k1', 60000);
SELECT sandbox_persist.lock_acquire('mon-k2', 1000, pg_temp.now_ms() - 10000);
SELECT ok(sandbox_persist.lock_acquire('mon-k1', 60000) IS NULL, 'MON5 a held lock is not granted');
SELECT is(pg_temp.takeovers('lock'), 0::bigint, 'MON5.1 nor counted');
SELECT ok(sandbox_persist.lock_acquire('mon-k2', 60000) IS NOT NULL, 'MON5.2 an expired lock is taken over');
SELECT is(pg_temp.takeovers('lock'), 1::bigint, 'MON5.3 and counted');
SELECT ok(sandbox_persist.lock_release('mon-k1', (SELECT owner_token::text FROM sandbox_persist.locks
                                                    WHERE lock_key = 'mon-k1')),
    'MON5.4 release a lock');
SELECT ok(sandbox_persist.lock_acquire('mon-k1', 60000) IS NOT NULL, 'MON5.5 acquire it again');
SELECT is(pg_temp.takeovers('lock'), 1::bigint, 'MON5.6 no takeover after a release');
SELECT is(pg_temp.m('sandbox_persist_locks_held'), 2::float8, 'MON5.7 locks held');
SELECT is(pg_temp.m('sandbox_persist_lease_takeovers_total', '{"kind":"lock"}'), 1::float8,
    'MON5.8 metrics() shows lock takeovers');

-- MON6: producer-lost logs (A10) and open logs.
SELECT sandbox_persist.event_log_append('mon-lost', '[{"type":"TEXT_MESSAGE_CONTENT","delta":"a"}]');
SELECT sandbox_persist.maintain(1000, pg_temp.now_ms() + 3600 * 1000);
SELECT sandbox_persist.event_log_append('mon-open', '[{"type":"TEXT_MESSAGE_CONTENT","delta":"b"}]');
SELECT is(pg_temp.m('sandbox_persist_event_logs_producer_lost'), 1::float8, 'MON6 one producer-lost log');
SELECT is(pg_temp.m('sandbox_persist_event_logs_open'), 1::float8, 'MON6.1 one open log');

-- MON7: the recorded duration and the age of the last run.
SELECT sandbox_persist.maintain();
SELECT ok(pg_temp.m('sandbox_persist_maintenance_last_duration_seconds') >= 0
          AND pg_temp.m('sandbox_persist_maintenance_last_duration_seconds') < 60,
    'MON7 maintain() records its duration');
SELECT is((SELECT maintenance_last_duration_ms FROM sandbox_persist.overview)::float8 / 1000,
    pg_temp.m('sandbox_persist_maintenance_last_duration_seconds'), 'MON7.1 as overview shows it, in seconds');
SELECT ok(pg_temp.m('sandbox_persist_maintenance_last_run_age_seconds') BETWEEN 0 AND 60,
    'MON7.2 the last run is seconds old');

-- MON8: the GC backlog is what maintain() then collects.
SELECT sandbox_persist.blob_put('sandbox-files/sha256/' || encode(sha256('mon-a'), 'hex'), 'mon-a',
                                NULL, pg_temp.now_ms() - 48 * 3600 * 1000);
SELECT sandbox_persist.blob_put('sandbox-files/sha256/' || encode(sha256('mon-b'), 'hex'), 'mon-b',
                                NULL, pg_temp.now_ms() - 48 * 3600 * 1000);
SELECT sandbox_persist.blob_put('sandbox-files/sha256/' || encode(sha256('mon-c'), 'hex'), 'mon-c');
SELECT sandbox_persist.blob_upload_begin('plain/mon-upload', NULL, pg_temp.now_ms() - 48 * 3600 * 1000);
SELECT is(sandbox_persist._maintenance_backlog()::jsonb,
    '{"blobs": 2, "uploads": 1, "locks": 0, "eventLogs": 0, "runs": 0, "conversationBlocks": 0}'::jsonb,
    'MON8 backlog: the two blobs past their grace and the idle upload');
SELECT is(ARRAY(SELECT labels->>'action' || '=' || value FROM sandbox_persist.metrics('{sandbox_persist_gc_backlog_rows}')
                 ORDER BY 1),
    ARRAY['blobs=2', 'conversationBlocks=0', 'eventLogs=0', 'locks=0', 'runs=0', 'uploads=1'],
    'MON8.1 metrics() shows it by action');
SELECT is(pg_temp.m('sandbox_persist_blobs_awaiting_gc'), 3::float8,
    'MON8.2 blobs awaiting GC counts those within their grace too');
SELECT is((sandbox_persist.maintain(1)::jsonb) - ARRAY['detachedRuns', 'dueRuns', 'attentionNew', 'attentionResolved',
                                                        'logsClosed', 'logsProducerLost'],
    '{"blobsDeleted": 1, "uploadsRemoved": 1, "locksPurged": 0, "logsDeleted": 0, "runsDeleted": 0,
      "conversationPositionsDeleted": 0, "conversationMessagesDeleted": 0, "blobsRecompressed": 0, "streamsPurged": 0}'::jsonb,
    'MON8.3 maintain(1) collects one blob and the upload');
SELECT is(sandbox_persist._maintenance_backlog()->>'blobs', '1', 'MON8.4 one blob left in the backlog');
SELECT sandbox_persist.maintain();
SELECT is(sandbox_persist._maintenance_backlog()::jsonb,
    '{"blobs": 0, "uploads": 0, "locks": 0, "eventLogs": 0, "runs": 0, "conversationBlocks": 0}'::jsonb,
    'MON8.5 the backlog is empty once maintain() has collected it');

-- MON9: the rest equals overview, sample by sample.
SELECT is((SELECT array_agg(v ORDER BY k) FROM (VALUES
        ('blobs', o.blobs), ('raw', o.blob_raw_bytes), ('stored', o.blob_stored_bytes),
        ('uploads', o.uploads_open), ('attention', o.attention_items)) x(k, v))::float8[],
    ARRAY[pg_temp.m('sandbox_persist_attention_items'), pg_temp.m('sandbox_persist_blobs'),
          pg_temp.m('sandbox_persist_blob_raw_bytes'), pg_temp.m('sandbox_persist_blob_stored_bytes'),
          pg_temp.m('sandbox_persist_uploads_open')],
    'MON9 blobs, bytes, uploads and attention items equal overview')
  FROM sandbox_persist.overview o;
SELECT is(ARRAY(SELECT labels->>'table' FROM sandbox_persist.metrics('{sandbox_persist_table_size_bytes}') ORDER BY 1),
    ARRAY(SELECT c.relname::text FROM pg_extension e, unnest(e.extconfig) t(oid) JOIN pg_class c ON c.oid = t.oid
           WHERE e.extname = 'sandbox_persist' AND c.relkind = 'r' ORDER BY 1),
    'MON9.1 one size per table of the extension');
SELECT is(pg_temp.m('sandbox_persist_table_size_bytes', '{"table":"runs"}'),
    pg_total_relation_size('sandbox_persist.runs')::float8, 'MON9.2 sizes are pg_total_relation_size');
SELECT is((SELECT count(*)::int FROM sandbox_persist.metrics('{no_such_metric}')), 0,
    'MON9.3 an unknown family yields no rows');

-- MON10: grant_monitor_role gives the metrics and nothing else.
CREATE ROLE sp_test_monitor NOLOGIN;
SELECT lives_ok($$SELECT sandbox_persist.grant_monitor_role('sp_test_monitor')$$, 'MON10 grant_monitor_role runs');
SELECT throws_ok($$SELECT sandbox_persist.grant_monitor_role(0::oid::regrole)$$, '22023', NULL,
    'MON10.1 an unknown role is 22023');
SELECT ok(has_function_privilege('sp_test_monitor', 'sandbox_persist.metrics(text[])', 'EXECUTE')
          AND NOT has_function_privilege('sp_test_monitor', 'sandbox_persist.run_get(text)', 'EXECUTE')
          AND NOT has_table_privilege('sp_test_monitor', 'sandbox_persist.runs', 'SELECT')
          AND NOT has_table_privilege('sp_test_monitor', 'sandbox_persist.overview', 'SELECT'),
    'MON10.2 the monitor role may call metrics() and nothing else');
SET LOCAL ROLE sp_test_monitor;
SELECT is((SELECT value FROM sandbox_persist.metrics('{sandbox_persist_runs}') WHERE labels->>'status' = 'running'),
    3::float8, 'MON10.3 and reads the metrics as that role');
RESET ROLE;
CREATE ROLE sp_test_monitor_app NOLOGIN;
SELECT sandbox_persist.grant_app_role('sp_test_monitor_app');
SELECT ok(has_function_privilege('sp_test_monitor_app', 'sandbox_persist.run_get(text)', 'EXECUTE')
          AND NOT has_function_privilege('sp_test_monitor_app', 'sandbox_persist.metrics(text[])', 'EXECUTE')
          AND NOT has_function_privilege('sp_test_monitor_app', 'sandbox_persist.grant_monitor_role(regrole)', 'EXECUTE'),
    'MON10.4 grant_app_role gives neither metrics() nor grant_monitor_role');
SELECT sandbox_persist.revoke_app_role('sp_test_monitor');
SELECT ok(NOT has_function_privilege('sp_test_monitor', 'sandbox_persist.metrics(text[])', 'EXECUTE')
          AND NOT has_schema_privilege('sp_test_monitor', 'sandbox_persist', 'USAGE'),
    'MON10.5 revoke_app_role withdraws it');

SELECT * FROM finish();
ROLLBACK;
