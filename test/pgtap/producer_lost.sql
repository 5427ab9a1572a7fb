-- pgTAP: maintenance ends the open event log of a run whose producer is gone
-- (action A10, sandbox_persist.event_log_idle_close): no append for longer
-- than the setting and no live run-driver:<runId> lock. The log gets one
-- terminal RUN_ERROR chunk, code PRODUCER_LOST, and is closed.
--
-- Clocks: appends stamp the server clock; maintain() and lock_acquire take an
-- injected now_ms, so each case reads the log's last_append_at (t) and calls
-- maintain at t + idle (just inside) and t + idle + 1 ms (just past).
--
-- Run with: pg_prove -d <db> test/pgtap/producer_lost.sql
-- (needs sandbox_persist.allow_test_reset and allow_client_clock on).
BEGIN;
SELECT plan(40);
SELECT sandbox_persist._reset_for_tests();
SET LOCAL sandbox_persist.allow_client_clock = on;

-- The last append time of a run's log.
CREATE FUNCTION pg_temp.t(run text) RETURNS bigint LANGUAGE sql AS $$
    SELECT last_append_at FROM sandbox_persist.event_logs WHERE run_id = run
$$;
CREATE FUNCTION pg_temp.closed(run text) RETURNS boolean LANGUAGE sql AS $$
    SELECT closed_at IS NOT NULL FROM sandbox_persist.event_logs WHERE run_id = run
$$;
-- The chunk at the tail of a run's log.
CREATE FUNCTION pg_temp.last_chunk(run text) RETURNS jsonb LANGUAGE sql AS $$
    SELECT e.chunk::jsonb FROM sandbox_persist.event_logs l
      JOIN sandbox_persist.event_log_entries e ON e.log_id = l.log_id AND e.seq = l.tail_seq
     WHERE l.run_id = run
$$;
CREATE FUNCTION pg_temp.lost(answer json) RETURNS int LANGUAGE sql AS $$
    SELECT (answer->>'logsProducerLost')::int
$$;
-- A run record with a status.
CREATE FUNCTION pg_temp.run(id text, status text DEFAULT 'running') RETURNS void LANGUAGE sql AS $$
    SELECT sandbox_persist.run_create_or_resume(json_build_object(
        'runId', id, 'threadId', 'thread-' || id, 'startedAt', 1, 'status', status))::text::void
$$;

\ir lib/durable_helpers.psql

\set idle 600000::bigint

------------------------------------------------------------------------------
-- P1: the default is 10 min; the boundary is strict.
------------------------------------------------------------------------------
SELECT is(current_setting('sandbox_persist.event_log_idle_close'), '10min',
    'P1.1 event_log_idle_close defaults to 10min');
SELECT sandbox_persist.event_log_append('p1-chat', '[{"type":"TEXT_MESSAGE_CONTENT","delta":"a"},{"i":2}]');
SELECT pg_temp.t('p1-chat') AS t \gset
SELECT is(pg_temp.lost(sandbox_persist.maintain(1000, :t + :idle)), 0,
    'P1.2 a log idle exactly event_log_idle_close is kept open');
SELECT ok(NOT pg_temp.closed('p1-chat'), 'P1.3 it is still open');
SELECT is(sandbox_persist.maintain(1000, :t + :idle + 1)::jsonb - 'attentionNew',
    '{"blobsDeleted":0,"uploadsRemoved":0,"locksPurged":0,"logsClosed":0,"logsProducerLost":1,
      "logsDeleted":0,"runsDeleted":0,"detachedRuns":0,"dueRuns":0,"attentionResolved":0,
      "conversationPositionsDeleted":0,"conversationMessagesDeleted":0,"blobsRecompressed":0,"streamsPurged":0}'::jsonb,
    'P1.4 one millisecond later maintain ends it (logsProducerLost 1, nothing else)');
SELECT ok(pg_temp.closed('p1-chat'), 'P1.5 the log is closed');
SELECT is(sandbox_persist.event_log_read('p1-chat', 0)::jsonb - 'entries' - 'logId',
    '{"exists":true,"closed":true,"tail":3}'::jsonb, 'P1.6 a reader sees it closed with one more entry');
SELECT is(pg_temp.last_chunk('p1-chat') - 'message' - 'error',
    jsonb_build_object('type', 'RUN_ERROR', 'runId', 'p1-chat', 'code', 'PRODUCER_LOST', 'timestamp', :t + :idle + 1),
    'P1.7 the terminal chunk is RUN_ERROR, code PRODUCER_LOST, stamped with maintenance''s clock');
SELECT is(pg_temp.last_chunk('p1-chat')->'error'->>'code', 'PRODUCER_LOST', 'P1.8 error.code is PRODUCER_LOST too');
SELECT matches(pg_temp.last_chunk('p1-chat')->>'message', '^The producer of this run stopped: no chunk was appended for 600 s',
    'P1.9 the message names the idle limit');
SELECT is(pg_temp.last_chunk('p1-chat')->'error'->>'message', pg_temp.last_chunk('p1-chat')->>'message',
    'P1.10 error.message repeats it');
SELECT is(sandbox_persist.event_log_snapshot('p1-chat')::jsonb -> 0 -> 'chunk',
    '{"type":"TEXT_MESSAGE_CONTENT","delta":"a"}'::jsonb, 'P1.11 the earlier entries are untouched');
SELECT is(pg_temp.t('p1-chat'), :t, 'P1.12 last_append_at still holds the producer''s last append');
SELECT is((SELECT appends_after_close FROM sandbox_persist.event_logs WHERE run_id = 'p1-chat'), 0::bigint,
    'P1.13 ending the log is not an append after close');
SELECT is(pg_temp.lost(sandbox_persist.maintain(1000, :t + 10 * :idle)), 0, 'P1.14 a second call finds nothing');
SELECT is(sandbox_persist.event_log_read('p1-chat', 0)->>'tail', '3', 'P1.15 and appends nothing');

------------------------------------------------------------------------------
-- P2: a held, unexpired run-driver lock keeps the log open.
------------------------------------------------------------------------------
SELECT sandbox_persist._reset_for_tests();
SELECT pg_temp.run('p2-driven'), pg_temp.run('p2-other'), pg_temp.run('p2-expiring');
SELECT sandbox_persist.event_log_append(r, '[{"i":1}]') FROM unnest(ARRAY['p2-driven', 'p2-other', 'p2-expiring']) r;
SELECT max(pg_temp.t(r)) AS t FROM unnest(ARRAY['p2-driven', 'p2-other', 'p2-expiring']) r \gset
SELECT :t + 5 * :idle AS n \gset
-- live until n + 1; a lock on another key; one that expires exactly at n
SELECT sandbox_persist.lock_acquire('run-driver:p2-driven', 1001, :n - 1000);
SELECT sandbox_persist.lock_acquire('run-driver:p2-other-run', 600000, :n);
SELECT sandbox_persist.lock_acquire('sandbox:p2-other', 600000, :n);
SELECT sandbox_persist.lock_acquire('run-driver:p2-expiring', 1000, :n - 1000);
SELECT is(pg_temp.lost(sandbox_persist.maintain(1000, :n)), 2,
    'P2.1 maintain ends the two logs without a live run-driver lock');
SELECT ok(NOT pg_temp.closed('p2-driven'), 'P2.2 the log whose run-driver lock is live is kept open');
SELECT ok(pg_temp.closed('p2-other'), 'P2.3 a lock on another key (another run, sandbox:) does not keep it');
SELECT ok(pg_temp.closed('p2-expiring'), 'P2.4 a lock expiring exactly now does not keep it');
SELECT is(pg_temp.lost(sandbox_persist.maintain(1000, :n + 1)), 1,
    'P2.5 once that lock expired too, the driven log is ended');
SELECT is(pg_temp.last_chunk('p2-driven')->>'code', 'PRODUCER_LOST', 'P2.6 with the terminal chunk');
SELECT is((SELECT status FROM sandbox_persist.runs WHERE run_id = 'p2-driven'), 'running',
    'P2.7 the run record is not changed (maintenance never changes a run)');

------------------------------------------------------------------------------
-- P3: which runs: unrecorded and running yes; interrupted no; terminal runs
-- are the existing close-grace rule's (closed without an error chunk).
------------------------------------------------------------------------------
SELECT sandbox_persist._reset_for_tests();
SELECT pg_temp.run('p3-running'), pg_temp.run('p3-interrupted', 'interrupted'), pg_temp.run('p3-done');
SELECT sandbox_persist.run_update('p3-done', '{"status":"completed","finishedAt":2}');
SELECT sandbox_persist.event_log_append(r, '[{"i":1}]')
  FROM unnest(ARRAY['p3-running', 'p3-interrupted', 'p3-done', 'p3-unrecorded']) r;
SELECT max(pg_temp.t(r)) AS t FROM unnest(ARRAY['p3-running', 'p3-interrupted', 'p3-done', 'p3-unrecorded']) r \gset
SELECT sandbox_persist.maintain(1000, :t + 3 * :idle) AS m \gset
SELECT is((:'m'::json->>'logsProducerLost')::int, 2, 'P3.1 two logs are ended as producer-lost');
SELECT is((:'m'::json->>'logsClosed')::int, 1, 'P3.2 the terminal run''s log is closed by the close-grace rule');
SELECT ok(pg_temp.closed('p3-running') AND pg_temp.closed('p3-unrecorded'),
    'P3.3 the running run''s and the unrecorded run''s logs are closed');
SELECT is(pg_temp.last_chunk('p3-unrecorded')->>'type', 'RUN_ERROR', 'P3.4 each with a RUN_ERROR chunk');
SELECT ok(NOT pg_temp.closed('p3-interrupted'), 'P3.5 an interrupted run''s log (waiting for a person) stays open');
SELECT is(pg_temp.last_chunk('p3-done'), '{"i":1}'::jsonb, 'P3.6 the terminal run''s log gets no error chunk');

------------------------------------------------------------------------------
-- P4: the setting: 0 turns the rule off; units; bounded per call.
------------------------------------------------------------------------------
SELECT sandbox_persist._reset_for_tests();
SELECT sandbox_persist.event_log_append('p4-' || i, '[{"i":1}]') FROM generate_series(1, 3) i;
SELECT min(pg_temp.t('p4-' || i)) AS t0, max(pg_temp.t('p4-' || i)) AS t FROM generate_series(1, 3) i \gset
SET LOCAL sandbox_persist.event_log_idle_close = 0;
SELECT is(pg_temp.lost(sandbox_persist.maintain(1000, :t + 3650 * 86400000::bigint)), 0,
    'P4.1 with event_log_idle_close 0 no log is ended, at any age');
SET LOCAL sandbox_persist.event_log_idle_close = '2s';
SELECT is(pg_temp.lost(sandbox_persist.maintain(1000, :t0 + 2000)), 0, 'P4.2 with 2s: kept at exactly 2 s');
SELECT is(ARRAY[pg_temp.lost(sandbox_persist.maintain(2, :t + 2001)), pg_temp.lost(sandbox_persist.maintain(2, :t + 2001)),
                pg_temp.lost(sandbox_persist.maintain(2, :t + 2001))],
    ARRAY[2, 1, 0], 'P4.3 ended past 2 s, at most max_rows per call');
SELECT is((SELECT count(*) FROM sandbox_persist.event_logs WHERE closed_at IS NULL), 0::bigint, 'P4.4 all three are closed');
SET LOCAL sandbox_persist.event_log_idle_close = '2147483647s';
SELECT sandbox_persist.event_log_append('p4-huge', '[{"i":1}]');
SELECT is(pg_temp.lost(sandbox_persist.maintain(1000, -9223372036854775807)), 0,
    'P4.5 the largest setting with the smallest clock does not overflow (saturating cutoff)');
SELECT is(pg_temp.lost(sandbox_persist.maintain(1000, 9223372036854775807)), 1,
    'P4.6 the largest clock ends it');
RESET sandbox_persist.event_log_idle_close;
SELECT is(pg_temp.sp('SET sandbox_persist.event_log_idle_close = -1'), '22023',
    'P4.7 a negative setting is refused');

------------------------------------------------------------------------------
-- P5: an append after the end: the producer was only slow. The append waits
-- for nothing (the close has committed), lands after the error chunk and is
-- counted; the watchdog reports it (append_after_close).
------------------------------------------------------------------------------
SELECT sandbox_persist._reset_for_tests();
SELECT sandbox_persist.event_log_append('p5-slow', '[{"i":1}]');
SELECT pg_temp.t('p5-slow') AS t \gset
SELECT pg_temp.lost(sandbox_persist.maintain(1000, :t + :idle + 1));
SELECT is(sandbox_persist.event_log_append('p5-slow', '[{"i":2}]')::text, '[3]',
    'P5.1 a late append is accepted after the error chunk');
SELECT is((SELECT appends_after_close FROM sandbox_persist.event_logs WHERE run_id = 'p5-slow'), 1::bigint,
    'P5.2 and counted as an append after close');
SELECT ok(pg_temp.closed('p5-slow'), 'P5.3 the log stays closed (event_log_reopen_on_append is off)');
SELECT is(pg_temp.lost(sandbox_persist.maintain(1000, :t + 10 * :idle)), 0, 'P5.4 a closed log is never ended twice');
SELECT is((SELECT count(*) FROM sandbox_persist.event_log_entries e JOIN sandbox_persist.event_logs l USING (log_id)
            WHERE l.run_id = 'p5-slow' AND e.chunk->>'code' = 'PRODUCER_LOST'), 1::bigint,
    'P5.5 it holds exactly one error chunk');

SELECT * FROM finish();
ROLLBACK;
