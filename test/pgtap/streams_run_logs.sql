-- pgTAP: a run's event log read through the durable streams functions as the
-- read-only JSON stream run-logs/<run_id> (docs/contract/streams.md §1), with
-- offsets that carry the epoch of each entry (§3). Cases DS24-DS31 (listed in
-- streams.md §8). Every refused call is checked for its SQLSTATE and for
-- leaving the stream and event log tables unchanged.
-- Run with: pg_prove -d <db> test/pgtap/streams_run_logs.sql (needs
-- allow_test_reset and allow_client_clock on).
BEGIN;
SELECT plan(94);
SELECT sandbox_persist._reset_for_tests();
SET LOCAL sandbox_persist.allow_client_clock = on;
SET LOCAL sandbox_persist.test_timeline = 1;

------------------------------------------------------------------------------
-- Helpers (temporary, gone at ROLLBACK).
------------------------------------------------------------------------------

-- Every row of the stream and event log tables: equal values mean nothing changed.
CREATE FUNCTION pg_temp.state() RETURNS text LANGUAGE sql AS $$
    SELECT concat_ws(E'\n',
        (SELECT string_agg(s::text, E'\n' ORDER BY s.stream_id) FROM sandbox_persist.streams s),
        (SELECT string_agg(e::text, E'\n' ORDER BY e.stream_id, e.seq) FROM sandbox_persist.stream_entries e),
        (SELECT string_agg(l::text, E'\n' ORDER BY l.log_id) FROM sandbox_persist.event_logs l),
        (SELECT string_agg(e::text, E'\n' ORDER BY e.log_id, e.seq) FROM sandbox_persist.event_log_entries e))
$$;

\ir lib/durable_helpers.psql

-- The message of the error a statement raises (the attempt is undone).
CREATE FUNCTION pg_temp.message(stmt text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    m text;
BEGIN
    EXECUTE stmt;
    RETURN 'no error';
EXCEPTION WHEN OTHERS THEN
    GET STACKED DIAGNOSTICS m = MESSAGE_TEXT;
    RETURN m;
END
$$;

-- Append chunks (a JSON array text) to a run's log.
CREATE FUNCTION pg_temp.ev(run text, chunks text) RETURNS json LANGUAGE sql AS $$
    SELECT sandbox_persist.event_log_append(run, chunks::json)
$$;
-- Read run-logs/<run> (body as text).
CREATE FUNCTION pg_temp.rd(run text, off text DEFAULT '-1', mb integer DEFAULT 1048576)
RETURNS TABLE (meta json, body text) LANGUAGE sql AS $$
    SELECT r.meta, convert_from(r.body, 'UTF8') FROM sandbox_persist.stream_read('run-logs/' || run, off, mb, 1000) r
$$;
CREATE FUNCTION pg_temp.off(e bigint, s bigint) RETURNS text LANGUAGE sql AS $$
    SELECT lpad(e::text, 16, '0') || '_' || lpad(s::text, 16, '0')
$$;
CREATE FUNCTION pg_temp.log_id(run text) RETURNS bigint LANGUAGE sql AS $$
    SELECT log_id FROM sandbox_persist.event_logs WHERE run_id = run
$$;
-- A log's epoch transitions as '<first seqs> <epochs>', 'none' when it has none.
CREATE FUNCTION pg_temp.transitions(run text) RETURNS text LANGUAGE sql AS $$
    SELECT coalesce(epoch_first_seqs::text || ' ' || epochs::text, 'none')
      FROM sandbox_persist.event_logs WHERE run_id = run
$$;
-- Every offset a reader paging one chunk at a time from -1 is given, in order.
CREATE FUNCTION pg_temp.offsets(run text) RETURNS text[] LANGUAGE plpgsql AS $$
DECLARE
    o text := '-1';
    m json;
    acc text[] := '{}';
BEGIN
    LOOP
        SELECT r.meta INTO m FROM pg_temp.rd(run, o, 1) r;
        EXIT WHEN m->>'nextOffset' = o;
        o := m->>'nextOffset';
        acc := acc || o;
        EXIT WHEN (m->>'upToDate')::boolean;
    END LOOP;
    RETURN acc;
END
$$;
-- Whether an array of text is strictly increasing as bytes (COLLATE "C").
CREATE FUNCTION pg_temp.increasing(a text[]) RETURNS boolean LANGUAGE sql AS $$
    SELECT coalesce(bool_and(x.v COLLATE "C" > x.p COLLATE "C"), true)
      FROM (SELECT v, lag(v) OVER (ORDER BY i) AS p FROM unnest(a) WITH ORDINALITY AS u(v, i)) x
     WHERE x.p IS NOT NULL
$$;

------------------------------------------------------------------------------
-- DS24: a run's log read from -1 is a JSON stream of its chunks, byte for byte.
------------------------------------------------------------------------------
SELECT pg_temp.ev('r1', $j$[{"type":"A","n":1}, {"s":"a\"b\\c\/d\n\u0000e\ud83d\ude00","k":1,"k":2},
  { "spaced" : [ 1 , 2.50e3 ] , "u" : "\u00e9" }]$j$)::text::void;
SELECT is((SELECT meta::jsonb FROM pg_temp.rd('r1')),
          json_build_object('streamId', 'eventLog:' || pg_temp.log_id('r1'), 'contentType', 'application/json',
                            'startOffset', pg_temp.off(0, 0), 'nextOffset', pg_temp.off(0, 3),
                            'upToDate', true, 'closed', false)::jsonb,
          'DS24: meta: a string streamId of the log, application/json, from the zero offset to the tail');
SELECT is((SELECT body FROM pg_temp.rd('r1')),
          $j$[{"type":"A","n":1},{"s":"a\"b\\c\/d\n\u0000e\ud83d\ude00","k":1,"k":2},{ "spaced" : [ 1 , 2.50e3 ] , "u" : "\u00e9" }]$j$,
          'DS24: the body is the array of the chunks, each its exact stored text (escapes, \u0000, surrogates, duplicate keys, spacing)');
SELECT is((SELECT body FROM pg_temp.rd('r1')),
          '[' || (SELECT string_agg(chunk::text, ',' ORDER BY seq) FROM sandbox_persist.event_log_entries
                   WHERE log_id = pg_temp.log_id('r1')) || ']',
          'DS24: the body joins the stored chunks with commas');
SELECT is((SELECT r.body FROM sandbox_persist.stream_read('run-logs/r1', '-1', 1048576, 1000) r),
          convert_to((SELECT body FROM pg_temp.rd('r1')), 'UTF8'), 'DS24: the body bytes are the UTF-8 text');
SELECT is(sandbox_persist.stream_head('run-logs/r1', NULL, 1000)::jsonb,
          json_build_object('streamId', 'eventLog:' || pg_temp.log_id('r1'), 'contentType', 'application/json',
                            'nextOffset', pg_temp.off(0, 3), 'closed', false)::jsonb,
          'DS24: head: streamId, contentType, the tail, closed');
SELECT is(sandbox_persist.stream_head('run-logs/r1', 'some-producer', 1000)::jsonb ? 'producer', false,
          'DS24: head with a producer id reports no producer (a run log has none)');
SELECT is((SELECT meta->>'nextOffset' FROM pg_temp.rd('r1')),
          (SELECT sandbox_persist.stream_head('run-logs/r1', NULL, 1000)->>'nextOffset'),
          'DS24: read and head agree on the tail');
SELECT pg_temp.ev('r1-empty', '[]')::text::void;
SELECT is(pg_temp.sp($$SELECT pg_temp.rd('r1-empty')$$), 'SP701 STREAM_NOT_FOUND',
          'DS24: an empty append creates no log, so no stream');

------------------------------------------------------------------------------
-- DS25: from a mid offset, paging by max_bytes, now, at the tail.
------------------------------------------------------------------------------
SELECT pg_temp.ev('r2', '[{"i":1},{"i":2},{"i":3},{"i":4},{"i":5}]')::text::void;
SELECT is((SELECT body FROM pg_temp.rd('r2', pg_temp.off(0, 2))), '[{"i":3},{"i":4},{"i":5}]',
          'DS25: a read from offset 0_2 returns the entries after 2');
SELECT is((SELECT meta->>'startOffset' FROM pg_temp.rd('r2', pg_temp.off(0, 2))), pg_temp.off(0, 2),
          'DS25: startOffset is the offset read from');
SELECT is((SELECT body FROM pg_temp.rd('r2', '-1', 15)), '[{"i":1},{"i":2}]',
          'DS25: max_bytes 15 takes whole chunks while they fit (7 + 1 + 7)');
SELECT is((SELECT meta->>'nextOffset' || ' ' || (meta->>'upToDate') FROM pg_temp.rd('r2', '-1', 15)),
          pg_temp.off(0, 2) || ' false', 'DS25: nextOffset after the last chunk taken, not up to date');
SELECT is((SELECT body FROM pg_temp.rd('r2', '-1', 1)), '[{"i":1}]',
          'DS25: max_bytes smaller than a chunk still takes one');
SELECT is((SELECT body FROM pg_temp.rd('r2', pg_temp.off(0, 2), 14)), '[{"i":3}]',
          'DS25: a page from a mid offset stops before the chunk that does not fit');
SELECT is((SELECT meta::jsonb - 'streamId' - 'contentType' FROM pg_temp.rd('r2', 'now')),
          json_build_object('startOffset', pg_temp.off(0, 5), 'nextOffset', pg_temp.off(0, 5),
                            'upToDate', true, 'closed', false)::jsonb,
          'DS25: now reads nothing and gives the tail');
SELECT is((SELECT body FROM pg_temp.rd('r2', 'now')), '[]', 'DS25: now: the empty array');
SELECT is((SELECT body || ' ' || (meta->>'upToDate') FROM pg_temp.rd('r2', pg_temp.off(0, 5))), '[] true',
          'DS25: a read at the tail is empty and up to date');
SELECT is(pg_temp.offsets('r2'), ARRAY[pg_temp.off(0, 1), pg_temp.off(0, 2), pg_temp.off(0, 3),
                                        pg_temp.off(0, 4), pg_temp.off(0, 5)],
          'DS25: paging one chunk at a time visits every offset once, in order');
SELECT is(pg_temp.sp($$SELECT pg_temp.rd('r2', '-1', 0)$$), '22023', 'DS25: max_bytes 0 is 22023');
SELECT pg_temp.ev('r2', '[{"i":6}]')::text::void;
SELECT is((SELECT body FROM pg_temp.rd('r2', pg_temp.off(0, 5))), '[{"i":6}]',
          'DS25: the old tail offset reads what was appended after it');

------------------------------------------------------------------------------
-- DS26: closed.
------------------------------------------------------------------------------
SELECT pg_temp.ev('r3', '[{"i":1},{"i":2}]')::text::void;
SELECT sandbox_persist.event_log_close('r3');
SELECT is((SELECT (meta->>'closed') || ' ' || (meta->>'upToDate') FROM pg_temp.rd('r3', '-1', 1)), 'false false',
          'DS26: a page that stops before the tail of a closed log is not closed');
SELECT is((SELECT (meta->>'closed') || ' ' || (meta->>'upToDate') FROM pg_temp.rd('r3')), 'true true',
          'DS26: a read reaching the tail of a closed log is closed');
SELECT is((SELECT meta->>'closed' FROM pg_temp.rd('r3', 'now')), 'true', 'DS26: now on a closed log: closed');
SELECT is((sandbox_persist.stream_head('run-logs/r3', NULL, 1000)->>'closed'), 'true', 'DS26: head of a closed log');
SELECT sandbox_persist.event_log_close('r3-never-appended');
SELECT is((SELECT body || ' ' || (meta->>'nextOffset') || ' ' || (meta->>'closed') FROM pg_temp.rd('r3-never-appended')),
          '[] ' || pg_temp.off(0, 0) || ' true', 'DS26: a log closed without entries reads as a closed empty stream');

------------------------------------------------------------------------------
-- DS27: no such run log is SP701.
------------------------------------------------------------------------------
SELECT pg_temp.rejects($$SELECT pg_temp.rd('nobody')$$, 'SP701 STREAM_NOT_FOUND', 'DS27: read of a run without a log');
SELECT pg_temp.rejects($$SELECT sandbox_persist.stream_head('run-logs/nobody', NULL, 1000)$$, 'SP701 STREAM_NOT_FOUND',
                       'DS27: head of a run without a log');
SELECT pg_temp.rejects($$SELECT pg_temp.rd('')$$, 'SP701 STREAM_NOT_FOUND', 'DS27: run-logs/ with an empty run id');
SELECT pg_temp.rejects($$SELECT pg_temp.rd('nobody', pg_temp.off(0, 0))$$, 'SP701 STREAM_NOT_FOUND',
                       'DS27: not found comes before the offset check');
SELECT is(pg_temp.sp($$SELECT sandbox_persist.stream_read('Run-logs/r1', '-1', 1000, 1000)$$), 'SP701 STREAM_NOT_FOUND',
          'DS27: the prefix is case-sensitive: Run-logs/r1 is a protocol stream path');
SELECT is((sandbox_persist.stream_create('run-logsx/r1', 'text/plain', NULL, NULL, 1000)->>'created'), 'true',
          'DS27: run-logsx/ is an ordinary path');
SELECT pg_temp.rejects($$SELECT pg_temp.rd('r2/x')$$, 'SP701 STREAM_NOT_FOUND',
                       'DS27: run-logs/<run>/x names the run "<run>/x", which has no log');

------------------------------------------------------------------------------
-- DS28: writes at run-logs/... are SP703; a protocol stream row there is shadowed.
------------------------------------------------------------------------------
SELECT pg_temp.rejects($$SELECT sandbox_persist.stream_create('run-logs/r1', 'application/json', NULL, NULL, 1000)$$,
                       'SP703 STREAM_CONFLICT', 'DS28: create at the path of a run log');
SELECT pg_temp.rejects($$SELECT sandbox_persist.stream_create('run-logs/no-log-yet', 'application/json', NULL, NULL, 1000)$$,
                       'SP703 STREAM_CONFLICT', 'DS28: create at run-logs/ for a run without a log');
SELECT pg_temp.rejects($$SELECT sandbox_persist.stream_append('run-logs/r1', 'application/json', convert_to('{"x":1}', 'UTF8'), NULL, 1000)$$,
                       'SP703 STREAM_CONFLICT', 'DS28: append');
SELECT pg_temp.rejects($$SELECT sandbox_persist.stream_append('run-logs/r1', NULL, NULL, '{"close":true}', 1000)$$,
                       'SP703 STREAM_CONFLICT', 'DS28: a close-only append');
SELECT pg_temp.rejects($$SELECT sandbox_persist.stream_delete('run-logs/r1', 1000)$$, 'SP703 STREAM_CONFLICT', 'DS28: delete');
SELECT pg_temp.rejects($$SELECT sandbox_persist.stream_create('fork-of-run', 'application/json', '{"forkedFrom":"run-logs/r1"}', NULL, 1000)$$,
                       'SP703 STREAM_CONFLICT', 'DS28: a fork of a run log');
SELECT is(pg_temp.message($$SELECT sandbox_persist.stream_append('run-logs/r1', 'application/json', convert_to('{"x":1}', 'UTF8'), NULL, 1000)$$),
          'stream path is a run''s event log', 'DS28: the message names the reason');
-- A protocol stream row at run-logs/... (none can exist after a create: only by
-- hand or a development build of 0.5.0) is shadowed: reads serve the run
-- log, writes are refused, the row is left alone.
INSERT INTO sandbox_persist.streams (path, content_type, json_mode, created_at, touched_at)
VALUES ('run-logs/r2', 'text/plain', false, 1000, 1000), ('run-logs/legacy', 'text/plain', false, 1000, 1000);
SELECT is((SELECT body FROM pg_temp.rd('r2', pg_temp.off(0, 5))), '[{"i":6}]',
          'DS28: a protocol stream row at run-logs/<run> does not hide the run log');
SELECT pg_temp.rejects($$SELECT pg_temp.rd('legacy')$$, 'SP701 STREAM_NOT_FOUND',
                       'DS28: a protocol stream row at run-logs/<run> without a log is not served');
SELECT pg_temp.rejects($$SELECT sandbox_persist.stream_delete('run-logs/legacy', 1000)$$, 'SP703 STREAM_CONFLICT',
                       'DS28: nor deleted');

------------------------------------------------------------------------------
-- DS29: an offset the log never issued is SP708; malformed is 22023.
------------------------------------------------------------------------------
SELECT pg_temp.rejects($$SELECT pg_temp.rd('r2', pg_temp.off(0, 7))$$, 'SP708 STREAM_OFFSET_GONE',
                       'DS29: past the tail');
SELECT pg_temp.rejects($$SELECT pg_temp.rd('r2', pg_temp.off(1, 3))$$, 'SP708 STREAM_OFFSET_GONE',
                       'DS29: an entry with another epoch');
SELECT pg_temp.rejects($$SELECT pg_temp.rd('r2', pg_temp.off(1, 6))$$, 'SP708 STREAM_OFFSET_GONE',
                       'DS29: the tail with another epoch');
SELECT pg_temp.rejects($$SELECT pg_temp.rd('r2', pg_temp.off(1, 0))$$, 'SP708 STREAM_OFFSET_GONE',
                       'DS29: seq 0 with an epoch');
SELECT pg_temp.rejects($$SELECT pg_temp.rd('r2', '0000000000000000_000000000000001')$$, '22023',
                       'DS29: a malformed offset');
SELECT pg_temp.rejects($$SELECT pg_temp.rd('r2', '')$$, '22023', 'DS29: an empty offset');
SELECT is((SELECT body FROM pg_temp.rd('r2', pg_temp.off(0, 0))), '[{"i":1},{"i":2},{"i":3},{"i":4},{"i":5},{"i":6}]',
          'DS29: the zero offset reads from the start');

------------------------------------------------------------------------------
-- DS30: epochs: a later timeline raises the epoch of the entries appended
-- after it, stored as one transition; offsets stay strictly increasing.
------------------------------------------------------------------------------
SELECT pg_temp.ev('r4', '[{"i":1},{"i":2}]')::text::void;
SELECT pg_temp.ev('r4', '[{"i":3}]')::text::void;
SELECT is((SELECT pg_temp.transitions('r4')),
          'none', 'DS30: appends on timeline 1 store no transition');
SET LOCAL sandbox_persist.test_timeline = 3;
SELECT pg_temp.ev('r4', '[{"i":4},{"i":5}]')::text::void;
SELECT is((SELECT pg_temp.transitions('r4')),
          '{4} {2}', 'DS30: the first append on timeline 3 stores the transition (4, epoch 2)');
SELECT pg_temp.ev('r4', '[{"i":6}]')::text::void;
SELECT is((SELECT pg_temp.transitions('r4')),
          '{4} {2}', 'DS30: later appends on the same timeline add none');
SELECT is(pg_temp.offsets('r4'), ARRAY[pg_temp.off(0, 1), pg_temp.off(0, 2), pg_temp.off(0, 3),
                                        pg_temp.off(2, 4), pg_temp.off(2, 5), pg_temp.off(2, 6)],
          'DS30: entries before the transition keep epoch 0, those after have epoch 2');
SET LOCAL sandbox_persist.test_timeline = 2;
SELECT pg_temp.ev('r4', '[{"i":7}]')::text::void;
SELECT is((SELECT meta->>'nextOffset' FROM pg_temp.rd('r4', 'now')), pg_temp.off(2, 7),
          'DS30: on a lower timeline the epoch never goes back');
SELECT is((SELECT pg_temp.transitions('r4')),
          '{4} {2}', 'DS30: and no transition is stored');
SET LOCAL sandbox_persist.test_timeline = 5;
SELECT pg_temp.ev('r4', '[{"i":8}]')::text::void;
SELECT is((SELECT pg_temp.transitions('r4')),
          '{4,8} {2,4}', 'DS30: a second failover appends a second transition');
SELECT ok(pg_temp.increasing(pg_temp.offsets('r4')), 'DS30: every offset sorts (COLLATE "C") after the one before');
SELECT is(cardinality(pg_temp.offsets('r4')), 8, 'DS30: one offset per entry');
SELECT is((SELECT body FROM pg_temp.rd('r4', pg_temp.off(0, 3), 16)), '[{"i":4},{"i":5}]',
          'DS30: an offset from before the transition pages across it');
SELECT is((SELECT meta->>'nextOffset' FROM pg_temp.rd('r4', pg_temp.off(0, 3), 16)), pg_temp.off(2, 5),
          'DS30: with the new epoch in nextOffset');
SELECT is((SELECT body FROM pg_temp.rd('r4', pg_temp.off(2, 7))), '[{"i":8}]', 'DS30: an offset of epoch 2 reads on');
SELECT pg_temp.rejects($$SELECT pg_temp.rd('r4', pg_temp.off(0, 4))$$, 'SP708 STREAM_OFFSET_GONE',
                       'DS30: entry 4 with the old epoch');
SELECT pg_temp.rejects($$SELECT pg_temp.rd('r4', pg_temp.off(2, 3))$$, 'SP708 STREAM_OFFSET_GONE',
                       'DS30: entry 3 with the new epoch');
SELECT is(sandbox_persist.event_log_read('r4', 0)->'entries'->7->>'chunk', '{"i":8}',
          'DS30: event_log_read is unchanged by the transitions');
-- Maintenance's PRODUCER_LOST chunk (A10) follows the same rule.
SET LOCAL sandbox_persist.test_timeline = 7;
SELECT pg_temp.ev('r5', '[{"i":1}]')::text::void;
SET LOCAL sandbox_persist.test_timeline = 8;
SELECT (sandbox_persist.maintain(1000, (SELECT last_append_at FROM sandbox_persist.event_logs WHERE run_id = 'r5')
                                       + 600001))::text::void;
SELECT is((SELECT pg_temp.transitions('r5') || ' ' || tail_seq || ' ' || (closed_at IS NOT NULL)
             FROM sandbox_persist.event_logs WHERE run_id = 'r5'),
          '{1,2} {6,7} 2 true', 'DS30: A10''s terminal chunk on a later timeline stores a transition');
SELECT is(pg_temp.offsets('r5'), ARRAY[pg_temp.off(6, 1), pg_temp.off(7, 2)],
          'DS30: the terminal chunk''s offset has the later epoch');

------------------------------------------------------------------------------
-- DS31: a lost-commit failover: entries lost and rewritten at the same seqs
-- on a later timeline; offsets naming the lost entries are SP708.
------------------------------------------------------------------------------
SET LOCAL sandbox_persist.test_timeline = 1;
SELECT pg_temp.ev('r6', '[{"i":1},{"i":2},{"i":3}]')::text::void;
SELECT pg_temp.ev('r6', '[{"i":"lost 4"},{"i":"lost 5"}]')::text::void;
SELECT pg_temp.offsets('r6') AS before_loss \gset
-- The failover: entries 4 and 5 never reached the standby, whose log row
-- still has tail 3 (what a promoted standby holds).
DELETE FROM sandbox_persist.event_log_entries WHERE log_id = pg_temp.log_id('r6') AND seq > 3;
UPDATE sandbox_persist.event_logs l SET tail_seq = 3,
       tail_digest = (SELECT digest FROM sandbox_persist.event_log_entries e WHERE e.log_id = l.log_id AND e.seq = 3)
 WHERE run_id = 'r6';
SET LOCAL sandbox_persist.test_timeline = 2;
SELECT pg_temp.ev('r6', '[{"i":"new 4"},{"i":"new 5"},{"i":"new 6"}]')::text::void;
SELECT pg_temp.rejects($$SELECT pg_temp.rd('r6', pg_temp.off(0, 5))$$, 'SP708 STREAM_OFFSET_GONE',
                       'DS31: the lost tail offset 0_5, whose seq the log holds again, is refused');
SELECT pg_temp.rejects($$SELECT pg_temp.rd('r6', pg_temp.off(0, 4))$$, 'SP708 STREAM_OFFSET_GONE',
                       'DS31: so is the lost 0_4');
SELECT is((SELECT body FROM pg_temp.rd('r6', pg_temp.off(0, 3))), '[{"i":"new 4"},{"i":"new 5"},{"i":"new 6"}]',
          'DS31: the last surviving offset reads the rewritten entries');
SELECT is(pg_temp.offsets('r6'), ARRAY[pg_temp.off(0, 1), pg_temp.off(0, 2), pg_temp.off(0, 3),
                                        pg_temp.off(1, 4), pg_temp.off(1, 5), pg_temp.off(1, 6)],
          'DS31: the rewritten entries have epoch 1');
SELECT ok((SELECT bool_and(n COLLATE "C" > all(:'before_loss'::text[])) FROM unnest(pg_temp.offsets('r6')) n
            WHERE n COLLATE "C" > pg_temp.off(0, 3)),
          'DS31: every offset issued after the failover sorts above every offset the lost history issued');

SELECT * FROM finish();
ROLLBACK;
