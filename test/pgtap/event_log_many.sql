-- pgTAP: event_log_append_many, many appends in one statement (the adapter's
-- micro-batcher; docs/contract/event-log.md §2.3). Cases EM1-EM4 (ours):
-- a batch answers and leaves exactly what event_log_append one call after
-- another would, and a refused batch changes nothing. (EM5, the lock order,
-- is the isolation spec x38_event_log_many_lock_order.)
-- Run with: pg_prove -d <db> test/pgtap/event_log_many.sql (needs allow_test_reset).
BEGIN;
SELECT plan(46);
SELECT sandbox_persist._reset_for_tests();
SET LOCAL sandbox_persist.event_log_reopen_on_append = if_run_active;

------------------------------------------------------------------------------
-- Helpers (temporary, gone at ROLLBACK).
------------------------------------------------------------------------------

-- Every row of the log tables and the runs: equal values mean nothing changed.
CREATE FUNCTION pg_temp.state() RETURNS text LANGUAGE sql AS $$
    SELECT concat_ws(E'\n',
        (SELECT string_agg(l::text, E'\n' ORDER BY l.log_id) FROM sandbox_persist.event_logs l),
        (SELECT string_agg(e::text, E'\n' ORDER BY e.log_id, e.seq) FROM sandbox_persist.event_log_entries e),
        (SELECT string_agg(p::text, E'\n' ORDER BY p.log_id, p.producer_id, p.producer_seq)
           FROM sandbox_persist.event_log_producers p),
        (SELECT string_agg(r::text, E'\n' ORDER BY r.run_id) FROM sandbox_persist.runs r))
$$;

\ir lib/durable_helpers.psql

-- The logs of the runs named prefix || name, by name: their rows (but ids and
-- times), entries (with digests) and ledger rows. Two prefixes given the same
-- appends compare equal.
CREATE FUNCTION pg_temp.logs(prefix text) RETURNS text LANGUAGE sql AS $$
    SELECT concat_ws(E'\n',
        (SELECT string_agg(format('%s tail=%s closed=%s after_close=%s digest=%s epochs=%s',
                                  substr(l.run_id, length(prefix) + 1), l.tail_seq, l.closed_at IS NOT NULL,
                                  l.appends_after_close, l.tail_digest, l.epochs), E'\n' ORDER BY l.run_id)
           FROM sandbox_persist.event_logs l WHERE starts_with(l.run_id, prefix)),
        (SELECT string_agg(format('%s/%s %s %s', substr(l.run_id, length(prefix) + 1), e.seq, e.chunk, e.digest),
                           E'\n' ORDER BY l.run_id, e.seq)
           FROM sandbox_persist.event_log_entries e JOIN sandbox_persist.event_logs l USING (log_id)
          WHERE starts_with(l.run_id, prefix)),
        (SELECT string_agg(format('%s %s/%s first=%s count=%s', substr(l.run_id, length(prefix) + 1),
                                  p.producer_id, p.producer_seq, p.first_seq, p.chunk_count),
                           E'\n' ORDER BY l.run_id, p.producer_id, p.producer_seq)
           FROM sandbox_persist.event_log_producers p JOIN sandbox_persist.event_logs l USING (log_id)
          WHERE starts_with(l.run_id, prefix)))
$$;

-- The runs and logs the batch of EM1 meets, under a prefix: a running run
-- whose log is closed, a completed one whose log is closed, a log that
-- holds a committed idempotent append, a run at driverEpoch 2.
CREATE FUNCTION pg_temp.setup(prefix text) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    PERFORM sandbox_persist.run_create_or_resume(json_build_object('runId', prefix || 'run', 'threadId', prefix || 't', 'startedAt', 1));
    PERFORM sandbox_persist.event_log_append(prefix || 'run', '[{"c":0}]');
    PERFORM sandbox_persist.event_log_close(prefix || 'run');
    PERFORM sandbox_persist.run_create_or_resume(json_build_object('runId', prefix || 'done', 'threadId', prefix || 't', 'startedAt', 2));
    PERFORM sandbox_persist.run_update(prefix || 'done', '{"status":"completed","finishedAt":3}');
    PERFORM sandbox_persist.event_log_append(prefix || 'done', '[{"d":0}]');
    PERFORM sandbox_persist.event_log_close(prefix || 'done');
    PERFORM sandbox_persist.event_log_append(prefix || 'old', '[{"b":0}]',
        '{"producerId":"aaaaaaaa-2222-4333-8444-555555555555","producerSeq":1}');
    PERFORM sandbox_persist.run_create_or_resume(json_build_object('runId', prefix || 'fenced', 'threadId', prefix || 't', 'startedAt', 4));
    PERFORM sandbox_persist.run_update(prefix || 'fenced', '{"driverEpoch":2}');
END
$$;

-- The appends of EM1 for a prefix, in input order (deliberately not sorted
-- by run): new and existing logs, several appends to one log, a committed
-- retry, a retry of an append of the same batch, closed logs that reopen
-- and that do not, a fenced append, empty appends.
CREATE FUNCTION pg_temp.batch(prefix text) RETURNS json LANGUAGE sql AS $$
    SELECT json_agg(json_build_object('runId', prefix || a.run, 'chunks', a.chunks::json, 'options', a.options::json) ORDER BY a.n)
    FROM (VALUES
        (1, 'new', '[{"a":1},{"a":2}]', '{"withDigests":true}'),
        (2, 'old', '[{"b":1}]', '{"producerId":"aaaaaaaa-2222-4333-8444-555555555555","producerSeq":1}'),
        (3, 'old', '[{"b":2}]', '{"producerId":"aaaaaaaa-2222-4333-8444-555555555555","producerSeq":2,"withDigests":true}'),
        (4, 'new', '[{"a":3}]', NULL),
        (5, 'run', '[{"c":1}]', NULL),
        (6, 'run', '[{"c":2},{"c":3}]', '{"withDigests":true}'),
        (7, 'done', '[{"d":1}]', NULL),
        (8, 'done', '[{"d":2}]', NULL),
        (9, 'old', '[{"other":"text"}]', '{"producerId":"AAAAAAAA-2222-4333-8444-555555555555","producerSeq":2,"withDigests":true}'),
        (10, 'fenced', '[{"f":1}]', '{"fenceEpoch":2,"withDigests":true}'),
        (11, 'new', '[]', NULL),
        (12, 'empty', '[]', '{"withDigests":true}'),
        (13, 'a-last', '[{"z":1}]', '{"producerId":"bbbbbbbb-2222-4333-8444-555555555555","producerSeq":9}')
    ) AS a(n, run, chunks, options)
$$;

-- The same appends made one event_log_append call at a time, their results as one array.
CREATE FUNCTION pg_temp.one_by_one(appends json) RETURNS json LANGUAGE sql AS $$
    SELECT json_agg(sandbox_persist.event_log_append(a->>'runId', a->'chunks', CASE WHEN json_typeof(a->'options') = 'null' THEN NULL ELSE a->'options' END) ORDER BY n)
    FROM json_array_elements(appends) WITH ORDINALITY AS t(a, n)
$$;

------------------------------------------------------------------------------
-- EM1: a batch equals event_log_append called for each part in order.
------------------------------------------------------------------------------
SELECT pg_temp.setup('s-'), pg_temp.setup('m-');
SELECT is(pg_temp.logs('m-'), pg_temp.logs('s-'), 'EM1.1 the two prefixes start equal');
SELECT pg_temp.one_by_one(pg_temp.batch('s-'))::text AS em1_one_by_one \gset
SELECT sandbox_persist.event_log_append_many(pg_temp.batch('m-'))::text AS em1_many \gset
SELECT is(:'em1_many'::jsonb, :'em1_one_by_one'::jsonb, 'EM1.2 the batch returns what the calls one by one return, in input order');
SELECT is(pg_temp.logs('m-'), pg_temp.logs('s-'),
    'EM1.3 and leaves the same logs: tails, closed flags, after-close counts, digests, entries and ledger');
SELECT is(json_array_length(:'em1_many'::json), 13, 'EM1.4 one result per append');
SELECT is(:'em1_many'::json ->> 0, '[{"seq":1,"digest":"' || (SELECT lpad(to_hex(e.digest), 16, '0')
        FROM sandbox_persist.event_log_entries e JOIN sandbox_persist.event_logs l USING (log_id)
        WHERE l.run_id = 'm-new' AND e.seq = 1) || '"},{"seq":2,"digest":"' || (SELECT lpad(to_hex(e.digest), 16, '0')
        FROM sandbox_persist.event_log_entries e JOIN sandbox_persist.event_logs l USING (log_id)
        WHERE l.run_id = 'm-new' AND e.seq = 2) || '"}]',
    'EM1.5 a new log is numbered from 1, with the stored digests as tokens');
SELECT is(:'em1_many'::json ->> 3, '[3]', 'EM1.6 a second append to the same log in the batch continues its numbering');
SELECT is(:'em1_many'::json ->> 1, '[1]', 'EM1.7 a committed idempotent append repeated in the batch returns its numbers');
SELECT is(:'em1_many'::json ->> 8, :'em1_many'::json ->> 2,
    'EM1.8 a repeat inside the batch (the producer id in capitals) returns the tokens of the first');
SELECT is((SELECT count(*) FROM sandbox_persist.event_log_entries e JOIN sandbox_persist.event_logs l USING (log_id)
           WHERE l.run_id = 'm-old'), 2::bigint, 'EM1.9 neither repeat stored an entry');
SELECT is((SELECT closed_at IS NULL FROM sandbox_persist.event_logs WHERE run_id = 'm-run'), true,
    'EM1.10 the closed log of a running run is reopened by its first append');
SELECT is((SELECT appends_after_close FROM sandbox_persist.event_logs WHERE run_id = 'm-run'), 1::bigint,
    'EM1.11 and only that append counts as made after close');
SELECT is((SELECT appends_after_close FROM sandbox_persist.event_logs WHERE run_id = 'm-done'), 2::bigint,
    'EM1.12 the closed log of a completed run stays closed: both appends count');
SELECT is(:'em1_many'::json ->> 10, '[]', 'EM1.13 an empty append to an existing log returns []');
SELECT is((SELECT count(*) FROM sandbox_persist.event_logs WHERE run_id IN ('m-empty', 's-empty')), 0::bigint,
    'EM1.14 and an empty append creates no log');
SELECT is((sandbox_persist.event_log_read_verified('m-run', 1,
        (SELECT lpad(to_hex(e.digest), 16, '0') FROM sandbox_persist.event_log_entries e JOIN sandbox_persist.event_logs l USING (log_id)
          WHERE l.run_id = 'm-run' AND e.seq = 1), 10) -> 'entries')::text,
    (sandbox_persist.event_log_read_verified('s-run', 1,
        (SELECT lpad(to_hex(e.digest), 16, '0') FROM sandbox_persist.event_log_entries e JOIN sandbox_persist.event_logs l USING (log_id)
          WHERE l.run_id = 's-run' AND e.seq = 1), 10) -> 'entries')::text,
    'EM1.15 a verified read vouches for the batch''s digests as for the single appends''');
SELECT is(sandbox_persist.event_log_append_many('[]')::text, '[]', 'EM1.16 an empty batch returns []');

------------------------------------------------------------------------------
-- EM2: a refused part refuses the batch, and nothing of it is written.
------------------------------------------------------------------------------
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.event_log_append_many(
        '[{"runId":"em2-new","chunks":[{"i":1}]},{"runId":"m-fenced","chunks":[{"i":1}],"options":{"fenceEpoch":1}}]')$$,
    'SP404 EVENT_LOG_FENCE_STALE', 'EM2.1 a stale fence in the second part (the first part''s new log is not created)');
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.event_log_append_many(
        '[{"runId":"m-new","chunks":[{"i":1}]},{"runId":"m-old","chunks":[{"i":1},{"i":2}],"options":{"producerId":"aaaaaaaa-2222-4333-8444-555555555555","producerSeq":1}}]')$$,
    'SP403 EVENT_LOG_PRODUCER_SEQ_CONFLICT', 'EM2.2 a committed producer sequence repeated with another chunk count');
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.event_log_append_many(
        '[{"runId":"em2-x","chunks":[{"i":1}],"options":{"producerId":"cccccccc-2222-4333-8444-555555555555","producerSeq":1}},{"runId":"em2-x","chunks":[{"i":1},{"i":2}],"options":{"producerId":"cccccccc-2222-4333-8444-555555555555","producerSeq":1}}]')$$,
    'SP403 EVENT_LOG_PRODUCER_SEQ_CONFLICT', 'EM2.3 a producer sequence repeated inside the batch with another chunk count');

------------------------------------------------------------------------------
-- EM3: bad input: a specific SQLSTATE, nothing changed.
------------------------------------------------------------------------------
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.event_log_append_many(NULL)$$, '22004', 'EM3.1 appends SQL NULL');
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.event_log_append_many('{"runId":"x","chunks":[]}')$$, '22023',
    'EM3.2 appends an object, not an array');
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.event_log_append_many('[{"runId":"em3","chunks":[{"i":1}]}, 5]')$$, '22023',
    'EM3.3 a part that is not an object');
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.event_log_append_many('[{"runId":"em3","chunks":[{"i":1}],"chunk":[]}]')$$, '22023',
    'EM3.4 an unknown member');
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.event_log_append_many('[{"chunks":[{"i":1}]}]')$$, '22004',
    'EM3.5 a part without runId');
SELECT * FROM pg_temp.rejects(format($$SELECT sandbox_persist.event_log_append_many('[{"runId":"%s","chunks":[{"i":1}]}]')$$, repeat('r', 1025)), '22001',
    'EM3.6 a runId over 1024 bytes');
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.event_log_append_many('[{"runId":"em3","chunks":{"i":1}}]')$$, '22023',
    'EM3.7 chunks an object, not an array');
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.event_log_append_many('[{"runId":"em3","chunks":[{"i":1}]},{"runId":"em3","chunks":[{"i":1},2]}]')$$, '22023',
    'EM3.8 a chunk that is not an object, in the second part');
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.event_log_append_many('[{"runId":"em3","chunks":[{"i":1}],"options":[]}]')$$, '22023',
    'EM3.9 options an array');
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.event_log_append_many('[{"runId":"em3","chunks":[{"i":1}],"options":{"producerId":"not-a-uuid","producerSeq":1}}]')$$, '22023',
    'EM3.10 a producerId that is not a UUID');
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.event_log_append_many('[{"runId":"em3"}]')$$, '22004',
    'EM3.11 a part without chunks');

------------------------------------------------------------------------------
-- EM4: an error names the part at fault.
------------------------------------------------------------------------------
CREATE FUNCTION pg_temp.error_context(stmt text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    ctx text;
BEGIN
    EXECUTE stmt;
    RETURN 'no error';
EXCEPTION WHEN OTHERS THEN
    GET STACKED DIAGNOSTICS ctx = PG_EXCEPTION_CONTEXT;
    RETURN split_part(ctx, E'\n', 1);
END
$$;
SELECT is(pg_temp.error_context($$SELECT sandbox_persist.event_log_append_many('[{"runId":"em4","chunks":[{"i":1}]},{"runId":"em4-b","chunks":[1]}]')$$),
    'append 1 (run "em4-b") of event_log_append_many', 'EM4.1 a bad chunk: the context names the part (from 0) and its run');
SELECT is(pg_temp.error_context($$SELECT sandbox_persist.event_log_append_many('[{"runId":"em4","chunks":[{"i":1}]},{"chunks":[]}]')$$),
    'append 1 of event_log_append_many', 'EM4.2 a part without runId: the context names the part');

SELECT * FROM finish();
ROLLBACK;
