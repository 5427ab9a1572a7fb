-- pgTAP: the durable event log behind StreamDurability
-- (docs/contract/event-log.md). Cases: E1-E4, E6-E14, E16, E17, E20, and the
-- event-log parts of V9 (producerSeq 1.5) and V22 (negative after_seq).
-- (E5, X9 and X13 are isolation specs; E15, E18 and E19 are NODE.)
-- Run with: pg_prove -d <db> test/pgtap/event_log.sql (needs allow_test_reset).
BEGIN;
SELECT plan(142);
SELECT sandbox_persist._reset_for_tests();
SET LOCAL sandbox_persist.event_log_reopen_on_append = off;

------------------------------------------------------------------------------
-- Helpers (temporary, gone at ROLLBACK).
------------------------------------------------------------------------------

-- Every row of the three log tables (chunks as their exact text) and of the
-- runs table: equal values mean nothing was appended, created or changed.
CREATE FUNCTION pg_temp.state() RETURNS text LANGUAGE sql AS $$
    SELECT concat_ws(E'\n',
        'event_logs:' || (SELECT count(*) FROM sandbox_persist.event_logs),
        (SELECT string_agg(l::text, E'\n' ORDER BY l.log_id) FROM sandbox_persist.event_logs l),
        'entries:' || (SELECT count(*) FROM sandbox_persist.event_log_entries),
        (SELECT string_agg(format('%s/%s %s', e.log_id, e.seq, e.chunk::text), E'\n' ORDER BY e.log_id, e.seq)
           FROM sandbox_persist.event_log_entries e),
        'producers:' || (SELECT count(*) FROM sandbox_persist.event_log_producers),
        (SELECT string_agg(p::text, E'\n' ORDER BY p.log_id, p.producer_id, p.producer_seq)
           FROM sandbox_persist.event_log_producers p),
        'runs:' || (SELECT count(*) FROM sandbox_persist.runs),
        (SELECT string_agg(r::text, E'\n' ORDER BY r.run_id) FROM sandbox_persist.runs r))
$$;

\ir lib/durable_helpers.psql

-- The sequence numbers of read/snapshot entries, in answer order.
CREATE FUNCTION pg_temp.seqs(entries json) RETURNS bigint[] LANGUAGE sql AS $$
    SELECT coalesce(array_agg((e->>'seq')::bigint ORDER BY n), '{}')
    FROM json_array_elements(entries) WITH ORDINALITY AS t(e, n)
$$;
-- The internal log row of a run.
CREATE FUNCTION pg_temp.log_row(run text) RETURNS sandbox_persist.event_logs LANGUAGE sql AS $$
    SELECT l FROM sandbox_persist.event_logs l WHERE l.run_id = run
$$;
CREATE FUNCTION pg_temp.log_id(run text) RETURNS bigint LANGUAGE sql AS $$
    SELECT log_id FROM sandbox_persist.event_logs WHERE run_id = run
$$;
-- n chunks {"i":k} for k = from .. from + n - 1.
CREATE FUNCTION pg_temp.chunks(n int, start int DEFAULT 1) RETURNS json LANGUAGE sql AS $$
    SELECT ('[' || coalesce(string_agg(format('{"i":%s}', k), ',' ORDER BY k), '') || ']')::json
    FROM generate_series(start, start + n - 1) AS k
$$;

------------------------------------------------------------------------------
-- E1: the first append creates the log; numbering is dense from 1.
------------------------------------------------------------------------------
SELECT ok(pg_temp.log_id('e1') IS NULL, 'E1.1 before the first append run e1 has no log');
SELECT is(sandbox_persist.event_log_append('e1', '[{"t":"a"},{"t":"b"},{"t":"c"}]')::text, '[1,2,3]',
    'E1.2 the first append of three chunks returns exactly [1,2,3]');
SELECT ok(pg_temp.log_id('e1') IS NOT NULL, 'E1.3 the first append created the log');
SELECT is(sandbox_persist.event_log_append('e1', '[{"t":"d"},{"t":"e"}]')::text, '[4,5]',
    'E1.4 the next append continues at n + 1: [4,5]');
SELECT is(sandbox_persist.event_log_append('e1', '[{"t":"f"}]')::text, '[6]',
    'E1.5 a one-chunk append returns [6]');
SELECT is((SELECT array_agg(e->'chunk'->>'t' ORDER BY (e->>'seq')::int)
             FROM json_array_elements(sandbox_persist.event_log_snapshot('e1')) e),
    ARRAY['a', 'b', 'c', 'd', 'e', 'f'], 'E1.6 each number maps to its chunk, in append order');
SELECT is((sandbox_persist.event_log_read('e1', 0)->>'tail')::int, 6, 'E1.7 the tail is 6');
SELECT is(sandbox_persist.event_log_append('e1-other', '[{"t":"x"},{"t":"y"}]')::text, '[1,2]',
    'E1.8 another run''s log is numbered independently from 1');
SELECT isnt(pg_temp.log_id('e1-other'), pg_temp.log_id('e1'), 'E1.9 each run has its own log id');
SELECT is((sandbox_persist.event_log_read('e1', 0)->>'logId')::bigint, pg_temp.log_id('e1'),
    'E1.10 read reports the log id as a JSON number');

------------------------------------------------------------------------------
-- E2: an empty batch returns [] and creates nothing.
------------------------------------------------------------------------------
SELECT pg_temp.state() AS e2_before \gset
SELECT is(sandbox_persist.event_log_append('e2', '[]')::text, '[]', 'E2.1 an empty batch returns []');
SELECT is(pg_temp.state(), :'e2_before', 'E2.2 the empty batch created no log');
SELECT is(sandbox_persist.event_log_append('e2', '[]',
        '{"producerId":"6f1c2a0e-8d4b-4c53-9f0e-0a1b2c3d4e5f","producerSeq":1}')::text, '[]',
    'E2.3 an empty batch with a producer returns []');
SELECT is(pg_temp.state(), :'e2_before', 'E2.4 and creates no log and no ledger row');
SELECT is(sandbox_persist.event_log_append('e1', '[]')::text, '[]', 'E2.5 an empty batch to an existing log returns []');
SELECT is(pg_temp.state(), :'e2_before', 'E2.6 and changes nothing (tail, last append time)');
SELECT is(sandbox_persist.event_log_read('e2', 0)->>'exists', 'false', 'E2.7 read still reports no log for e2');

------------------------------------------------------------------------------
-- E3: chunks are stored and returned byte for byte.
------------------------------------------------------------------------------
SELECT is(sandbox_persist.event_log_append('e3',
        '[{"delta":"a\u0000b"},{"s":"\ud800","t":"x\udc00y"},{"b":1,"a":2},{"a":1,"a":2},'
        '{ "sp" : [ 1 , 2 ] , "n" : 1.50, "e": 1E3 },{"q":"\"\\\/\u00e9é\n"}]')::text,
    '[1,2,3,4,5,6]', 'E3.1 six unusual chunks are appended');
SELECT is(sandbox_persist.event_log_snapshot('e3')::text,
    '[{"seq":1,"chunk":{"delta":"a\u0000b"}},{"seq":2,"chunk":{"s":"\ud800","t":"x\udc00y"}},'
    '{"seq":3,"chunk":{"b":1,"a":2}},{"seq":4,"chunk":{"a":1,"a":2}},'
    '{"seq":5,"chunk":{ "sp" : [ 1 , 2 ] , "n" : 1.50, "e": 1E3 }},{"seq":6,"chunk":{"q":"\"\\\/\u00e9é\n"}}]',
    'E3.2 snapshot returns \u0000, lone surrogate escapes, key order, duplicate keys, spacing, number spelling and escapes exactly');
SELECT is(sandbox_persist.event_log_read('e3', 0)::text,
    format('{"logId":%s,"exists":true,"closed":false,"tail":6,"entries":', pg_temp.log_id('e3')) ||
    sandbox_persist.event_log_snapshot('e3')::text || '}',
    'E3.3 read returns the same exact chunk texts');
SELECT is(sandbox_persist.event_log_read('e3', 3, 1)::text,
    format('{"logId":%s,"exists":true,"closed":false,"tail":6,"entries":[{"seq":4,"chunk":{"a":1,"a":2}}]}',
           pg_temp.log_id('e3')),
    'E3.4 a duplicate-key chunk read alone keeps both members');

------------------------------------------------------------------------------
-- E4: read after k, oldest first, bounded by max_rows.
------------------------------------------------------------------------------
SELECT sandbox_persist.event_log_append('e4', pg_temp.chunks(5));
SELECT is(pg_temp.seqs(sandbox_persist.event_log_read('e4', 0)->'entries'), ARRAY[1, 2, 3, 4, 5]::bigint[],
    'E4.1 read(after 0) returns every entry, oldest first');
SELECT is((SELECT array_agg((e->'chunk'->>'i')::int ORDER BY n)
             FROM json_array_elements(sandbox_persist.event_log_read('e4', 0)->'entries') WITH ORDINALITY AS t(e, n)),
    ARRAY[1, 2, 3, 4, 5], 'E4.2 each entry carries its own chunk');
SELECT is(pg_temp.seqs(sandbox_persist.event_log_read('e4', 2)->'entries'), ARRAY[3, 4, 5]::bigint[],
    'E4.3 read(after 2) returns only seq > 2');
SELECT is(sandbox_persist.event_log_read('e4', 5)::jsonb,
    jsonb_build_object('logId', pg_temp.log_id('e4'), 'exists', true, 'closed', false, 'tail', 5, 'entries', '[]'::jsonb),
    'E4.4 read(after tail) returns no entries and the tail');
SELECT is(pg_temp.seqs(sandbox_persist.event_log_read('e4', 0, 2)->'entries'), ARRAY[1, 2]::bigint[],
    'E4.5 max_rows 2 bounds the page to the two oldest');
SELECT is((sandbox_persist.event_log_read('e4', 0, 2)->>'tail')::int, 5, 'E4.6 a bounded page still reports the real tail');
SELECT is(pg_temp.seqs(sandbox_persist.event_log_read('e4', 2, 2)->'entries'), ARRAY[3, 4]::bigint[],
    'E4.7 the next page continues after the cursor');
SELECT is(sandbox_persist.event_log_read('e4', 0, 0)::jsonb,
    jsonb_build_object('logId', pg_temp.log_id('e4'), 'exists', true, 'closed', false, 'tail', 5, 'entries', '[]'::jsonb),
    'E4.8 max_rows 0 returns just the tail');
SELECT is(pg_temp.seqs(sandbox_persist.event_log_read('e4', 3, 100)->'entries'), ARRAY[4, 5]::bigint[],
    'E4.9 max_rows beyond the remaining entries returns the rest');
SELECT sandbox_persist.event_log_append('e4-big', pg_temp.chunks(1005));
SELECT is(json_array_length(sandbox_persist.event_log_read('e4-big', 0)->'entries'), 1000,
    'E4.10 the default max_rows is 1000');
SELECT is(pg_temp.seqs(sandbox_persist.event_log_read('e4-big', 1000)->'entries'),
    ARRAY[1001, 1002, 1003, 1004, 1005]::bigint[], 'E4.11 the following page has the remaining five');

------------------------------------------------------------------------------
-- E6: an unknown run.
------------------------------------------------------------------------------
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.event_log_read('e6-missing', 1)$$,
    'SP401 EVENT_LOG_NOT_FOUND', 'E6.1 read(after 1) of an unknown run');
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.event_log_read('e6-missing', 1000, 0)$$,
    'SP401 EVENT_LOG_NOT_FOUND', 'E6.2 read(after 1000, max_rows 0) of an unknown run');
SELECT pg_temp.state() AS e6_before \gset
SELECT is((sandbox_persist.event_log_read('e6-missing', 0)::jsonb - 'logId'),
    '{"exists":false,"closed":false,"tail":0,"entries":[]}'::jsonb,
    'E6.3 read(after 0) of an unknown run: exists false, no entries');
SELECT ok(NOT sandbox_persist.event_log_read('e6-missing', 0)::jsonb ? 'logId'
          OR sandbox_persist.event_log_read('e6-missing', 0)->'logId' IS NULL,
    'E6.4 an unknown log reports no log id');
SELECT is(pg_temp.state(), :'e6_before', 'E6.5 reading an unknown run created nothing');

------------------------------------------------------------------------------
-- E7: read after the tail.
------------------------------------------------------------------------------
SELECT sandbox_persist.event_log_append('e7', pg_temp.chunks(3));
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.event_log_read('e7', 4)$$,
    'SP402 EVENT_LOG_OFFSET_OUT_OF_RANGE', 'E7.1 read(after tail + 1)');
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.event_log_read('e7', 9007199254740991, 0)$$,
    'SP402 EVENT_LOG_OFFSET_OUT_OF_RANGE', 'E7.2 read(after far beyond the tail, max_rows 0)');
SELECT sandbox_persist.event_log_close('e7-empty');
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.event_log_read('e7-empty', 1)$$,
    'SP402 EVENT_LOG_OFFSET_OUT_OF_RANGE', 'E7.3 read(after 1) of an existing empty log');
SELECT is(pg_temp.sp($$SELECT sandbox_persist.event_log_read('e7', 3)$$), 'no error',
    'E7.4 read(after tail) itself is fine');

------------------------------------------------------------------------------
-- E8: close is idempotent and keeps the first close time.
------------------------------------------------------------------------------
SELECT lives_ok($$SELECT sandbox_persist.event_log_close('e8-new')$$, 'E8.1 closing a never-appended log succeeds');
SELECT is(sandbox_persist.event_log_read('e8-new', 0)::jsonb,
    jsonb_build_object('logId', pg_temp.log_id('e8-new'), 'exists', true, 'closed', true, 'tail', 0, 'entries', '[]'::jsonb),
    'E8.2 it created a closed, empty log');
SELECT is(sandbox_persist.event_log_snapshot('e8-new')::text, '[]', 'E8.3 the closed empty log snapshots as []');
SELECT (pg_temp.log_row('e8-new')).closed_at AS e8_closed_at \gset
SELECT pg_sleep(0.02);
SELECT lives_ok($$SELECT sandbox_persist.event_log_close('e8-new')$$, 'E8.4 closing it again succeeds');
SELECT is((pg_temp.log_row('e8-new')).closed_at, :'e8_closed_at'::bigint, 'E8.5 the second close keeps the first close time');
SELECT sandbox_persist.event_log_append('e8', pg_temp.chunks(2));
SELECT sandbox_persist.event_log_close('e8');
SELECT (pg_temp.log_row('e8')).closed_at AS e8b_closed_at \gset
SELECT pg_sleep(0.02);
SELECT sandbox_persist.event_log_close('e8');
SELECT is((pg_temp.log_row('e8')).closed_at, :'e8b_closed_at'::bigint,
    'E8.6 closing a log with entries twice keeps the first close time');
SELECT is(sandbox_persist.event_log_read('e8', 0)::jsonb,
    jsonb_build_object('logId', pg_temp.log_id('e8'), 'exists', true, 'closed', true, 'tail', 2,
                       'entries', '[{"seq":1,"chunk":{"i":1}},{"seq":2,"chunk":{"i":2}}]'::jsonb),
    'E8.7 the closed log keeps its entries and tail and reads closed');
SELECT is((pg_temp.log_row('e8')).appends_after_close, 0::bigint, 'E8.8 closing is not counted as an append after close');

------------------------------------------------------------------------------
-- E9: appends after close are accepted, numbered on and counted.
------------------------------------------------------------------------------
SELECT sandbox_persist.run_create_or_resume('{"runId":"e9-running","threadId":"e9-t","startedAt":1}');
SELECT sandbox_persist.event_log_append('e9-running', pg_temp.chunks(2));
SELECT sandbox_persist.event_log_close('e9-running');
SELECT is(sandbox_persist.event_log_append('e9-running', '[{"i":3}]')::text, '[3]',
    'E9.1 an append after close is accepted and continues the numbering');
SELECT is((pg_temp.log_row('e9-running')).appends_after_close, 1::bigint, 'E9.2 it is counted');
SELECT is(sandbox_persist.event_log_read('e9-running', 0)->>'closed', 'true',
    'E9.3 with reopen off (the default) the log of a running run stays closed');
SELECT is(sandbox_persist.event_log_append('e9-running', '[{"i":4},{"i":5}]')::text, '[4,5]',
    'E9.4 a second append after close continues too');
SELECT is((pg_temp.log_row('e9-running')).appends_after_close, 2::bigint, 'E9.5 each append after close is counted once');
SELECT is(pg_temp.seqs(sandbox_persist.event_log_read('e9-running', 0)->'entries'), ARRAY[1, 2, 3, 4, 5]::bigint[],
    'E9.6 the appended entries are readable behind the closed flag');

SET LOCAL sandbox_persist.event_log_reopen_on_append = if_run_active;
SELECT sandbox_persist.run_create_or_resume('{"runId":"e9-reopen","threadId":"e9-t","startedAt":2}');
SELECT sandbox_persist.event_log_append('e9-reopen', pg_temp.chunks(1));
SELECT sandbox_persist.event_log_close('e9-reopen');
SELECT is(sandbox_persist.event_log_append('e9-reopen', '[{"i":2}]')::text, '[2]',
    'E9.7 if_run_active: an append after close of a running run is accepted');
SELECT is(sandbox_persist.event_log_read('e9-reopen', 0)->>'closed', 'false',
    'E9.8 if_run_active: the log of a running run is reopened');
SELECT is((pg_temp.log_row('e9-reopen')).appends_after_close, 1::bigint, 'E9.9 the reopening append is still counted');
SELECT sandbox_persist.run_create_or_resume('{"runId":"e9-int","threadId":"e9-t","startedAt":3,"status":"interrupted"}');
SELECT sandbox_persist.event_log_append('e9-int', pg_temp.chunks(1));
SELECT sandbox_persist.event_log_close('e9-int');
SELECT sandbox_persist.event_log_append('e9-int', '[{"i":2}]');
SELECT is(sandbox_persist.event_log_read('e9-int', 0)->>'closed', 'false',
    'E9.10 if_run_active: the log of an interrupted run is reopened');
SELECT sandbox_persist.run_create_or_resume('{"runId":"e9-done","threadId":"e9-t","startedAt":4}');
SELECT sandbox_persist.run_update('e9-done', '{"status":"completed","finishedAt":5}');
SELECT sandbox_persist.event_log_append('e9-done', pg_temp.chunks(1));
SELECT sandbox_persist.event_log_close('e9-done');
SELECT is(sandbox_persist.event_log_append('e9-done', '[{"i":2}]')::text, '[2]',
    'E9.11 if_run_active: an append after close of a terminal run is accepted');
SELECT is(sandbox_persist.event_log_read('e9-done', 0)->>'closed', 'true',
    'E9.12 if_run_active: the log of a terminal run stays closed');
SELECT is((pg_temp.log_row('e9-done')).appends_after_close, 1::bigint, 'E9.13 and the append is counted');
SELECT sandbox_persist.event_log_append('e9-norun', pg_temp.chunks(1));
SELECT sandbox_persist.event_log_close('e9-norun');
SELECT sandbox_persist.event_log_append('e9-norun', '[{"i":2}]');
SELECT is(sandbox_persist.event_log_read('e9-norun', 0)->>'closed', 'true',
    'E9.14 if_run_active: a log without a run record stays closed');
SET LOCAL sandbox_persist.event_log_reopen_on_append = off;

------------------------------------------------------------------------------
-- E10, E11: snapshot.
------------------------------------------------------------------------------
SELECT sandbox_persist.event_log_append('e10', pg_temp.chunks(3));
SELECT sandbox_persist.event_log_append('e10', pg_temp.chunks(2, 4));
SELECT is(sandbox_persist.event_log_snapshot('e10')::text,
    '[{"seq":1,"chunk":{"i":1}},{"seq":2,"chunk":{"i":2}},{"seq":3,"chunk":{"i":3}},{"seq":4,"chunk":{"i":4}},{"seq":5,"chunk":{"i":5}}]',
    'E10.1 snapshot returns every entry {seq, chunk} in order');
SELECT is(sandbox_persist.event_log_snapshot('e10-missing')::text, '[]', 'E10.2 snapshot of an unknown run is []');
SELECT is(json_array_length(sandbox_persist.event_log_snapshot('e4-big')), 1005,
    'E10.3 snapshot is not paged (all 1005 entries)');
SELECT is(sandbox_persist.event_log_snapshot('e9-running')::jsonb,
    (sandbox_persist.event_log_read('e9-running', 0)->'entries')::jsonb,
    'E10.4 snapshot of a closed log equals read(after 0) entries');
SELECT is((SELECT provolatile::text FROM pg_proc WHERE oid = 'sandbox_persist.event_log_snapshot(text)'::regprocedure), 's',
    'E10.5 snapshot is a STABLE read (one snapshot, takes no row locks, so it never waits)');
SELECT pg_temp.state() AS e11_before \gset
SELECT sandbox_persist.event_log_snapshot('e11-missing'), sandbox_persist.event_log_read('e11-missing', 0),
       sandbox_persist.event_log_read('e11-missing', 0, 0);
SELECT is(pg_temp.state(), :'e11_before', 'E11.1 snapshot and read of an unknown run create nothing');
SELECT ok(pg_temp.log_id('e11-missing') IS NULL, 'E11.2 no log row exists for it');

------------------------------------------------------------------------------
-- E12, E13: idempotent retries by (producerId, producerSeq).
------------------------------------------------------------------------------
SELECT is(sandbox_persist.event_log_append('e12', '[{"c":"a"},{"c":"b"}]',
        '{"producerId":"11111111-2222-4333-8444-555555555555","producerSeq":1}')::text, '[1,2]',
    'E12.1 the first append of producer P, seq 1 returns [1,2]');
SELECT is(sandbox_persist.event_log_append('e12', '[{"c":"c"}]',
        '{"producerId":"11111111-2222-4333-8444-555555555555","producerSeq":2}')::text, '[3]',
    'E12.2 P, seq 2 returns [3]');
SELECT pg_temp.state() AS e12_before \gset
SELECT is(sandbox_persist.event_log_append('e12', '[{"c":"a"},{"c":"b"}]',
        '{"producerId":"11111111-2222-4333-8444-555555555555","producerSeq":1}')::text, '[1,2]',
    'E12.3 repeating P, seq 1 with the same two chunks returns [1,2] again');
SELECT is(sandbox_persist.event_log_append('e12', '[{"c":"other"},{"c":"bytes"}]',
        '{"producerId":"11111111-2222-4333-8444-555555555555","producerSeq":1}')::text, '[1,2]',
    'E12.4 a retry is recognised by producer, seq and chunk count alone: [1,2]');
SELECT is(sandbox_persist.event_log_append('e12', '[{"c":"c"}]',
        '{"producerSeq":2,"producerId":"11111111-2222-4333-8444-555555555555"}')::text, '[3]',
    'E12.5 repeating P, seq 2 returns [3]');
SELECT is(pg_temp.state(), :'e12_before', 'E12.6 the retries appended nothing (tail, entries and ledger unchanged)');
SELECT is(sandbox_persist.event_log_snapshot('e12')::text,
    '[{"seq":1,"chunk":{"c":"a"}},{"seq":2,"chunk":{"c":"b"}},{"seq":3,"chunk":{"c":"c"}}]',
    'E12.7 the stored chunks are the originals');
SELECT is(sandbox_persist.event_log_append('e12', '[{"c":"d"}]',
        '{"producerId":"99999999-2222-4333-8444-555555555555","producerSeq":1}')::text, '[4]',
    'E12.8 another producer with the same seq appends anew: [4]');
SELECT is(sandbox_persist.event_log_append('e12-other', '[{"c":"z"}]',
        '{"producerId":"11111111-2222-4333-8444-555555555555","producerSeq":1}')::text, '[1]',
    'E12.9 the same producer and seq on another run''s log is a new append');
SELECT sandbox_persist.event_log_close('e12');
SELECT pg_temp.state() AS e12_closed \gset
SELECT is(sandbox_persist.event_log_append('e12', '[{"c":"c"}]',
        '{"producerId":"11111111-2222-4333-8444-555555555555","producerSeq":2}')::text, '[3]',
    'E12.10 a retry after close returns the original numbers');
SELECT is(pg_temp.state(), :'e12_closed', 'E12.11 and appends nothing (not even an append-after-close count)');

SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.event_log_append('e12', '[{"c":1},{"c":2},{"c":3}]',
        '{"producerId":"11111111-2222-4333-8444-555555555555","producerSeq":1}')$$,
    'SP403 EVENT_LOG_PRODUCER_SEQ_CONFLICT', 'E13.1 P, seq 1 again with three chunks instead of two');
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.event_log_append('e12', '[{"c":1}]',
        '{"producerId":"11111111-2222-4333-8444-555555555555","producerSeq":1}')$$,
    'SP403 EVENT_LOG_PRODUCER_SEQ_CONFLICT', 'E13.2 P, seq 1 again with one chunk');

------------------------------------------------------------------------------
-- E14: the fenced append.
------------------------------------------------------------------------------
SELECT sandbox_persist.run_create_or_resume('{"runId":"e14","threadId":"e14-t","startedAt":1}');
SELECT sandbox_persist.run_update('e14', '{"driverEpoch":2}');
SELECT is(sandbox_persist.event_log_append('e14', '[{"i":1}]', '{"fenceEpoch":2}')::text, '[1]',
    'E14.1 fenceEpoch equal to the run''s driverEpoch is accepted');
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.event_log_append('e14', '[{"i":2}]', '{"fenceEpoch":1}')$$,
    'SP404 EVENT_LOG_FENCE_STALE', 'E14.2 an older fenceEpoch');
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.event_log_append('e14', '[{"i":2}]', '{"fenceEpoch":3}')$$,
    'SP404 EVENT_LOG_FENCE_STALE', 'E14.3 a newer fenceEpoch');
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.event_log_append('e14-missing', '[{"i":1}]', '{"fenceEpoch":1}')$$,
    'SP404 EVENT_LOG_FENCE_STALE', 'E14.4 a fenced append for a missing run (no log is created)');
SELECT sandbox_persist.run_create_or_resume('{"runId":"e14-noepoch","threadId":"e14-t","startedAt":1}');
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.event_log_append('e14-noepoch', '[{"i":1}]', '{"fenceEpoch":0}')$$,
    'SP404 EVENT_LOG_FENCE_STALE', 'E14.5 a fenced append for a run that has no driverEpoch');
SELECT sandbox_persist.run_claim('e14');
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.event_log_append('e14', '[{"i":2}]',
        '{"fenceEpoch":2,"producerId":"21111111-2222-4333-8444-555555555555","producerSeq":7}')$$,
    'SP404 EVENT_LOG_FENCE_STALE', 'E14.6 after a claim bumped the epoch to 3, epoch 2 (with a producer)');
SELECT is(sandbox_persist.event_log_append('e14', '[{"i":2}]', '{"fenceEpoch":3}')::text, '[2]',
    'E14.7 the new epoch 3 is accepted and numbering continues');
SELECT is(sandbox_persist.event_log_append('e14', '[{"i":3}]')::text, '[3]',
    'E14.8 an unfenced append (the fresh producer) is never fenced');

------------------------------------------------------------------------------
-- E16: chunks that are not an array.
------------------------------------------------------------------------------
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.event_log_append('e16', '{"i":1}')$$, '22023',
    'E16.1 chunks given as an object');
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.event_log_append('e16', '"chunk"')$$, '22023',
    'E16.2 chunks given as a string');
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.event_log_append('e16', '3')$$, '22023',
    'E16.3 chunks given as a number');
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.event_log_append('e16', 'null')$$, '22023',
    'E16.4 chunks given as JSON null');
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.event_log_append('e16', '[{"i":1}')$$, '22P02',
    'E16.5 malformed JSON');
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.event_log_append('e1', '{"i":1}')$$, '22023',
    'E16.6 a non-array to an existing log');
SELECT ok(pg_temp.log_id('e16') IS NULL, 'E16.7 no log was created for e16');

------------------------------------------------------------------------------
-- E17: sequence numbers keep their chunks after close, maintenance, appends.
------------------------------------------------------------------------------
SELECT sandbox_persist.event_log_append('e17', '[{"k":"one"},{"k":"two"},{"k":"three"}]');
SELECT sandbox_persist.event_log_snapshot('e17')::text AS e17_snap \gset
SELECT sandbox_persist.event_log_close('e17');
SELECT sandbox_persist.maintain();
SELECT sandbox_persist.event_log_append('e17', '[{"k":"four"},{"k":"five"}]');
SELECT sandbox_persist.maintain();
SELECT is((SELECT json_agg(e)::text FROM (SELECT e FROM json_array_elements(sandbox_persist.event_log_snapshot('e17'))
                                           WITH ORDINALITY AS t(e, n) WHERE n <= 3 ORDER BY n) s),
    (SELECT json_agg(e)::text FROM json_array_elements(:'e17_snap'::json) e),
    'E17.1 entries 1-3 map to the same chunks after close, maintenance and later appends');
SELECT is(sandbox_persist.event_log_read('e17', 0, 3)->'entries'->2->'chunk'->>'k', 'three',
    'E17.2 read of the first page still maps 3 to "three"');
SELECT is(pg_temp.seqs(sandbox_persist.event_log_read('e17', 3)->'entries'), ARRAY[4, 5]::bigint[],
    'E17.3 the later appends got 4 and 5');

------------------------------------------------------------------------------
-- E20: one malformed element rejects the whole batch.
------------------------------------------------------------------------------
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.event_log_append('e1', '[{"t":"ok"},5]')$$, '22023',
    'E20.1 a batch whose second element is a number, to an existing log');
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.event_log_append('e1', '[{"t":"ok"},null]')$$, '22023',
    'E20.2 a batch with a JSON null element');
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.event_log_append('e1', '[[{"t":"ok"}],{"t":"ok"}]')$$, '22023',
    'E20.3 a batch whose first element is an array');
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.event_log_append('e20', '[{"t":"ok"},"text"]')$$, '22023',
    'E20.4 a batch with a string element, to a new log (none is created)');
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.event_log_append('e20', '[{"t":"ok"},{"t":"bad"]')$$, '22P02',
    'E20.5 a batch with a syntactically broken element');
SELECT is((sandbox_persist.event_log_read('e1', 0)->>'tail')::int, 6, 'E20.6 e1 still ends at 6');

------------------------------------------------------------------------------
-- V22, V9: bad numbers.
------------------------------------------------------------------------------
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.event_log_read('e1', -1)$$, '22023',
    'V22.1 event_log_read with after_seq -1');
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.event_log_read('e6-missing', -1)$$, '22023',
    'V22.2 event_log_read with after_seq -1 on an unknown run');
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.event_log_read('e1', 0, -1)$$, '22023',
    'V22.3 event_log_read with max_rows -1');
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.event_log_append('e1', '[{"t":"g"}]',
        '{"producerId":"31111111-2222-4333-8444-555555555555","producerSeq":1.5}')$$, '22023',
    'V9.1 producerSeq 1.5 (never rounded)');
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.event_log_append('e9v', '[{"t":"g"}]',
        '{"producerId":"31111111-2222-4333-8444-555555555555","producerSeq":1.5}')$$, '22023',
    'V9.2 producerSeq 1.5 for a new log (none is created)');
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.event_log_append('e14', '[{"t":"g"}]', '{"fenceEpoch":3.5}')$$,
    '22023', 'V9.3 fenceEpoch 3.5');

SELECT * FROM finish();
ROLLBACK;
