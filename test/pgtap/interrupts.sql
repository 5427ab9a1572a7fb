-- pgTAP: interrupt store (docs/contract/chat-stores.md §1).
-- Cases: P08-P10, R1-R6, R27, R28, R33, V1-V7, V9, V10, V12-V16, V18, V23, V24
-- (interrupt parts).
-- Run with: pg_prove -d <db> test/pgtap/interrupts.sql (needs allow_test_reset
-- and allow_client_clock).
BEGIN;
SELECT plan(256);
SELECT sandbox_persist._reset_for_tests();
\ir lib/chat_store_helpers.psql

-- 'SQLSTATE CODE_NAME', the name the SQLSTATE has in the error table
-- (error_codes()), when errdetail is a sentence that does not start with it.
CREATE FUNCTION pg_temp.sp_code(sql text) RETURNS text LANGUAGE sql AS $$
    SELECT CASE WHEN e IS NULL THEN 'no error'
                ELSE e[1] || ' ' || coalesce((SELECT c->>'codeName' FROM json_array_elements(sandbox_persist.error_codes()) c WHERE c->>'sqlstate' = e[1]
                                              AND coalesce(e[3], '') !~ '^[A-Z][A-Z0-9_]+: '),
                                             '<detail: ' || coalesce(e[3], 'none') || '>')
           END
    FROM (SELECT pg_temp.err(sql) AS e) s
$$;

-- A bad call: asserts the SQLSTATE (and, when given, a pattern the error
-- message must match, e.g. the unknown key's name), then that nothing changed.
CREATE FUNCTION pg_temp.rejects(sql text, code text, descr text, msg_re text DEFAULT NULL)
RETURNS SETOF text LANGUAGE plpgsql AS $$
DECLARE
    before text := pg_temp.state();
    e text[];
BEGIN
    RETURN NEXT throws_ok(sql, code::char(5), NULL, descr || ' -> ' || code);
    IF msg_re IS NOT NULL THEN
        e := pg_temp.err(sql);
        RETURN NEXT matches(coalesce(e[2], 'no error'), msg_re, descr || ': the message names it');
    END IF;
    RETURN NEXT is(pg_temp.state(), before, descr || ': nothing changed');
END
$$;

-- A contract error: asserts 'SQLSTATE CODE_NAME' (the name from the SQLSTATE),
-- the exact errdetail (upstream's sentence, no code name), then that nothing
-- changed.
CREATE FUNCTION pg_temp.rejects_sp(sql text, code text, detail text, descr text)
RETURNS SETOF text LANGUAGE plpgsql AS $$
DECLARE
    before text := pg_temp.state();
BEGIN
    RETURN NEXT is(pg_temp.sp_code(sql), code, descr || ' -> ' || code);
    RETURN NEXT is((pg_temp.err(sql))[3], detail, descr || ': errdetail is the upstream text, without the code name');
    RETURN NEXT is(pg_temp.state(), before, descr || ': nothing changed');
END
$$;

-- Interrupt ids of a JSON array of records, in array order (NULL for NULL).
CREATE FUNCTION pg_temp.ids(j json) RETURNS text[] LANGUAGE sql AS $$
    SELECT CASE WHEN j IS NULL THEN NULL ELSE
        coalesce((SELECT array_agg(e->>'interruptId' ORDER BY n)
                  FROM json_array_elements(j) WITH ORDINALITY AS t(e, n)), '{}') END
$$;

-- Create a pending interrupt with an empty payload.
CREATE FUNCTION pg_temp.mk(id text, run text, thread text, requested bigint) RETURNS boolean
LANGUAGE sql AS $$
    SELECT sandbox_persist.interrupt_create(json_build_object(
        'interruptId', id, 'runId', run, 'threadId', thread, 'requestedAt', requested,
        'payload', '{}'::json))
$$;

------------------------------------------------------------------------------
-- P08: create, get, the four lists, resolve, cancel.
------------------------------------------------------------------------------
SELECT ok(sandbox_persist.interrupt_get('int-missing') IS NULL,
    'P08.1 get of a missing interrupt is SQL NULL');
SELECT is(sandbox_persist.interrupt_create(
        '{"interruptId":"int-1","runId":"run-int","threadId":"thread-int","requestedAt":100,
          "payload":{"descriptor":{"id":"tool-call-1","kind":"approval"},"binding":{"interruptId":"int-1","interruptedRunId":"run-int"}}}'),
    true, 'P08.2 create of a new interrupt returns true');
SELECT is(sandbox_persist.interrupt_get('int-1')::jsonb,
    '{"interruptId":"int-1","runId":"run-int","threadId":"thread-int","status":"pending","requestedAt":100,
      "payload":{"descriptor":{"id":"tool-call-1","kind":"approval"},"binding":{"interruptId":"int-1","interruptedRunId":"run-int"}}}'::jsonb,
    'P08.3 the created interrupt reads back pending with its nested payload, no resolvedAt, no response');
SELECT is(sandbox_persist.interrupt_get('int-1')::text,
    '{"interruptId":"int-1","runId":"run-int","threadId":"thread-int","status":"pending","requestedAt":100,"payload":{"descriptor":{"id":"tool-call-1","kind":"approval"},"binding":{"interruptId":"int-1","interruptedRunId":"run-int"}}}',
    'P08.4 the record is built in the contract field order with the payload spliced verbatim');
SELECT sandbox_persist.interrupt_create(
    '{"interruptId":"int-2","runId":"run-int","threadId":"thread-int","requestedAt":200,"payload":{"n":2}}');
SELECT sandbox_persist.interrupt_create(
    '{"interruptId":"int-3","runId":"run-int-other","threadId":"thread-int","requestedAt":300,"payload":{"n":3}}');
SELECT sandbox_persist.interrupt_create(
    '{"interruptId":"int-4","runId":"run-int-4","threadId":"thread-int-other","requestedAt":50,"payload":{"n":4}}');
SELECT is(pg_temp.ids(sandbox_persist.interrupt_list('thread-int')), ARRAY['int-1', 'int-2', 'int-3'],
    'P08.5 list returns the thread''s three interrupts');
SELECT is(pg_temp.ids(sandbox_persist.interrupt_list_by_run('run-int')), ARRAY['int-1', 'int-2'],
    'P08.6 listByRun returns only the run''s interrupts');
SELECT is(pg_temp.ids(sandbox_persist.interrupt_list_pending('thread-int')), ARRAY['int-1', 'int-2', 'int-3'],
    'P08.7 listPending returns the three pending interrupts');
SELECT is(pg_temp.ids(sandbox_persist.interrupt_list_pending_by_run('run-int')), ARRAY['int-1', 'int-2'],
    'P08.8 listPendingByRun returns the run''s pending interrupts');
SELECT is(sandbox_persist.interrupt_resolve('int-1', '{"approved":true}'), true,
    'P08.9 resolve of an existing interrupt returns true');
SELECT is(sandbox_persist.interrupt_get('int-1')->>'status', 'resolved',
    'P08.10 resolve sets status resolved');
SELECT is((sandbox_persist.interrupt_get('int-1')->'response')::jsonb, '{"approved":true}'::jsonb,
    'P08.11 resolve stores the response');
SELECT is(json_typeof(sandbox_persist.interrupt_get('int-1')->'resolvedAt'), 'number',
    'P08.12 resolve stamps a numeric resolvedAt');
SELECT ok((sandbox_persist.interrupt_get('int-1')->>'resolvedAt')::bigint
          BETWEEN (extract(epoch FROM clock_timestamp()) * 1000)::bigint - 600000
              AND (extract(epoch FROM clock_timestamp()) * 1000)::bigint + 1000,
    'P08.13 without now_ms, resolvedAt is the server clock in epoch milliseconds');
SELECT is(sandbox_persist.interrupt_cancel('int-2'), true,
    'P08.14 cancel of an existing interrupt returns true');
SELECT is(sandbox_persist.interrupt_get('int-2')->>'status', 'cancelled',
    'P08.15 cancel sets status cancelled (two l''s)');
SELECT is(json_typeof(sandbox_persist.interrupt_get('int-2')->'resolvedAt'), 'number',
    'P08.16 cancel stamps a numeric resolvedAt');
SELECT ok(NOT sandbox_persist.interrupt_get('int-2')::jsonb ? 'response',
    'P08.17 a cancelled interrupt that never had a response has no response key');
SELECT is(pg_temp.ids(sandbox_persist.interrupt_list_pending('thread-int')), ARRAY['int-3'],
    'P08.18 afterwards listPending of the thread holds only the third interrupt');
SELECT is(sandbox_persist.interrupt_list_pending_by_run('run-int')::jsonb, '[]'::jsonb,
    'P08.19 afterwards listPendingByRun of the run is [] (not NULL)');
SELECT is(pg_temp.ids(sandbox_persist.interrupt_list('thread-int')), ARRAY['int-1', 'int-2', 'int-3'],
    'P08.20 list still returns every status');
SELECT is(pg_temp.ids(sandbox_persist.interrupt_list_by_run('run-int')), ARRAY['int-1', 'int-2'],
    'P08.21 listByRun still returns every status');
SELECT is(sandbox_persist.interrupt_list('thread-nobody')::jsonb, '[]'::jsonb,
    'P08.22 list of an unknown thread is []');
SELECT is(sandbox_persist.interrupt_list_by_run('run-nobody')::jsonb, '[]'::jsonb,
    'P08.23 listByRun of an unknown run is []');
SELECT is(sandbox_persist.interrupt_list_pending('thread-nobody')::jsonb, '[]'::jsonb,
    'P08.24 listPending of an unknown thread is []');
SELECT is((sandbox_persist.interrupt_list('thread-int')->0)::jsonb, sandbox_persist.interrupt_get('int-1')::jsonb,
    'P08.25 list elements are complete records, equal to get');
SELECT is(ARRAY[sandbox_persist.interrupt_get('int-1')->>'interruptId', sandbox_persist.interrupt_get('int-2')->>'interruptId'],
    ARRAY['int-1', 'int-2'],
    'P08.26 two gets in one statement each return their own record');

------------------------------------------------------------------------------
-- P09: re-creating a resolved interrupt is a no-op.
------------------------------------------------------------------------------
SELECT sandbox_persist.interrupt_create(
    '{"interruptId":"int-recreate","runId":"run-rc","threadId":"thread-rc","requestedAt":100,"payload":{"attempt":1}}');
SELECT sandbox_persist.interrupt_resolve('int-recreate', '{"answer":42}', 1234);
SELECT is(sandbox_persist.interrupt_create(
        '{"interruptId":"int-recreate","runId":"run-other","threadId":"thread-other","requestedAt":999,"payload":{"attempt":2}}'),
    false, 'P09.1 create of an existing id returns false');
SELECT is(sandbox_persist.interrupt_get('int-recreate')::jsonb,
    '{"interruptId":"int-recreate","runId":"run-rc","threadId":"thread-rc","status":"resolved","requestedAt":100,
      "resolvedAt":1234,"payload":{"attempt":1},"response":{"answer":42}}'::jsonb,
    'P09.2 status resolved, response {answer:42}, payload {attempt:1} and requestedAt 100 all survive');
SELECT is(sandbox_persist.interrupt_create(
        '{"interruptId":"int-recreate","runId":"run-rc","threadId":"thread-rc","requestedAt":100,"payload":{"attempt":1},"response":{"answer":0}}'),
    false, 'P09.3 an identical re-create carrying a response is also a no-op');
SELECT is((sandbox_persist.interrupt_get('int-recreate')->'response')::jsonb, '{"answer":42}'::jsonb,
    'P09.4 the stored response is not clobbered');
SELECT is((SELECT count(*) FROM sandbox_persist.interrupts WHERE interrupt_id = 'int-recreate'), 1::bigint,
    'P09.5 one row for the id');

------------------------------------------------------------------------------
-- P10: lists order by requestedAt.
------------------------------------------------------------------------------
SELECT pg_temp.mk('late', 'run-order', 'thread-order', 300);
SELECT pg_temp.mk('early', 'run-order', 'thread-order', 100);
SELECT pg_temp.mk('mid', 'run-order', 'thread-order', 200);
SELECT is(pg_temp.ids(sandbox_persist.interrupt_list('thread-order')), ARRAY['early', 'mid', 'late'],
    'P10.1 list orders by requestedAt: early, mid, late');
SELECT is(pg_temp.ids(sandbox_persist.interrupt_list_pending('thread-order')), ARRAY['early', 'mid', 'late'],
    'P10.2 listPending orders by requestedAt');
SELECT is(pg_temp.ids(sandbox_persist.interrupt_list_by_run('run-order')), ARRAY['early', 'mid', 'late'],
    'P10.3 listByRun orders by requestedAt');
SELECT is(pg_temp.ids(sandbox_persist.interrupt_list_pending_by_run('run-order')), ARRAY['early', 'mid', 'late'],
    'P10.4 listPendingByRun orders by requestedAt');

------------------------------------------------------------------------------
-- Create: response handling (docs/contract/README.md §6 rule 4).
------------------------------------------------------------------------------
SELECT sandbox_persist.interrupt_create(
    '{"interruptId":"cr-resp","runId":"run-cr","threadId":"thread-cr","requestedAt":1,"payload":{},"response":{"pre":true}}');
SELECT sandbox_persist.interrupt_create(
    '{"interruptId":"cr-null","runId":"run-cr","threadId":"thread-cr","requestedAt":1,"payload":{},"response":null}');
SELECT is(sandbox_persist.interrupt_get('cr-resp')::jsonb,
    '{"interruptId":"cr-resp","runId":"run-cr","threadId":"thread-cr","status":"pending","requestedAt":1,"payload":{},"response":{"pre":true}}'::jsonb,
    'R28.1 a response supplied at create is stored on the pending record');
SELECT is(sandbox_persist.interrupt_get('cr-null')::text,
    '{"interruptId":"cr-null","runId":"run-cr","threadId":"thread-cr","status":"pending","requestedAt":1,"payload":{},"response":null}',
    'R28.2 a JSON-null response at create is stored and reads back as "response": null');

------------------------------------------------------------------------------
-- R27: resolve without response clears; cancel keeps; re-stamps; unknown ids.
------------------------------------------------------------------------------
SELECT sandbox_persist.interrupt_create(
    '{"interruptId":"r27-a","runId":"run-r27","threadId":"thread-r27","requestedAt":1,"payload":{},"response":{"stored":1}}');
SELECT sandbox_persist.interrupt_resolve('r27-a', NULL, 1000);
SELECT is(sandbox_persist.interrupt_get('r27-a')::jsonb,
    '{"interruptId":"r27-a","runId":"run-r27","threadId":"thread-r27","status":"resolved","requestedAt":1,"resolvedAt":1000,"payload":{}}'::jsonb,
    'R27.1 resolve with SQL NULL response clears a stored response (no response key)');
SELECT sandbox_persist.interrupt_resolve('r27-a', '{"again":2}', 1500);
SELECT sandbox_persist.interrupt_resolve('r27-a', now_ms => 1600);
SELECT ok(NOT sandbox_persist.interrupt_get('r27-a')::jsonb ? 'response',
    'R27.2 resolve with the response argument omitted (DEFAULT NULL) clears it too');
SELECT sandbox_persist.interrupt_create(
    '{"interruptId":"r27-b","runId":"run-r27","threadId":"thread-r27","requestedAt":2,"payload":{},"response":{"keep":true}}');
SELECT is(sandbox_persist.interrupt_cancel('r27-b', 2000), true,
    'R27.3 cancel returns true');
SELECT is(sandbox_persist.interrupt_get('r27-b')::jsonb,
    '{"interruptId":"r27-b","runId":"run-r27","threadId":"thread-r27","status":"cancelled","requestedAt":2,"resolvedAt":2000,"payload":{},"response":{"keep":true}}'::jsonb,
    'R27.4 cancel keeps the stored response and stamps resolvedAt');
SELECT sandbox_persist.interrupt_resolve('r27-b', '"late answer"', 3000);
SELECT is(sandbox_persist.interrupt_get('r27-b')::jsonb,
    '{"interruptId":"r27-b","runId":"run-r27","threadId":"thread-r27","status":"resolved","requestedAt":2,"resolvedAt":3000,"payload":{},"response":"late answer"}'::jsonb,
    'R27.5 resolving a cancelled interrupt re-stamps it (no status guard)');
SELECT sandbox_persist.interrupt_resolve('r27-b', '"later answer"', 4000);
SELECT is(sandbox_persist.interrupt_get('r27-b')->>'resolvedAt', '4000',
    'R27.6 resolving an already resolved interrupt re-stamps it');
SELECT sandbox_persist.interrupt_cancel('r27-b', 5000);
SELECT is(sandbox_persist.interrupt_get('r27-b')::jsonb,
    '{"interruptId":"r27-b","runId":"run-r27","threadId":"thread-r27","status":"cancelled","requestedAt":2,"resolvedAt":5000,"payload":{},"response":"later answer"}'::jsonb,
    'R27.7 cancelling a resolved interrupt re-stamps it and keeps its response');
CREATE TEMP TABLE saved AS SELECT pg_temp.state() AS before;
SELECT is(sandbox_persist.interrupt_resolve('r27-unknown', '{"x":1}'), false,
    'R27.8 resolve of an unknown id returns false without failing');
SELECT is(sandbox_persist.interrupt_cancel('r27-unknown'), false,
    'R27.9 cancel of an unknown id returns false without failing');
SELECT is(pg_temp.state(), (SELECT before FROM saved),
    'R27.10 resolve and cancel of an unknown id insert nothing');
SELECT ok(sandbox_persist.interrupt_get('r27-unknown') IS NULL,
    'R27.11 the unknown id is still unknown');

------------------------------------------------------------------------------
-- R28: resolve(id, null) stores a JSON null response.
------------------------------------------------------------------------------
SELECT pg_temp.mk('r28', 'run-r28', 'thread-r28', 1);
SELECT sandbox_persist.interrupt_resolve('r28', 'null', 700);
SELECT ok(sandbox_persist.interrupt_get('r28')::jsonb ? 'response',
    'R28.3 after resolve(id, null) the response key is present');
SELECT is(json_typeof(sandbox_persist.interrupt_get('r28')->'response'), 'null',
    'R28.4 the response is the JSON value null');
SELECT is(sandbox_persist.interrupt_get('r28')::text,
    '{"interruptId":"r28","runId":"run-r28","threadId":"thread-r28","status":"resolved","requestedAt":1,"resolvedAt":700,"payload":{},"response":null}',
    'R28.5 the record reads back with "response": null');
SELECT sandbox_persist.interrupt_resolve('r28', '[1,{"b":[]}]', 701);
SELECT is((sandbox_persist.interrupt_get('r28')->'response')::text, '[1,{"b":[]}]',
    'R28.6 a response may be any JSON (an array here), stored verbatim');

------------------------------------------------------------------------------
-- R33: equal requestedAt lists in insertion order in all four lists.
------------------------------------------------------------------------------
SELECT pg_temp.mk('r33-z', 'run-r33', 'thread-r33', 500);
SELECT pg_temp.mk('r33-a', 'run-r33', 'thread-r33', 500);
SELECT pg_temp.mk('r33-m', 'run-r33', 'thread-r33', 500);
SELECT pg_temp.mk('r33-b', 'run-r33', 'thread-r33', 500);
SELECT pg_temp.mk('r33-first', 'run-r33', 'thread-r33', 499);
-- Updating r33-z moves its tuple to the end of the heap: it must keep its place.
SELECT sandbox_persist.interrupt_resolve('r33-z', '{}', 10);
SELECT sandbox_persist.interrupt_resolve('r33-z', '{"again":true}', 11);
SELECT sandbox_persist.interrupt_cancel('r33-m', 12);
SELECT is(pg_temp.ids(sandbox_persist.interrupt_list('thread-r33')),
    ARRAY['r33-first', 'r33-z', 'r33-a', 'r33-m', 'r33-b'],
    'R33.1 list keeps insertion order among equal requestedAt');
SELECT is(pg_temp.ids(sandbox_persist.interrupt_list_by_run('run-r33')),
    ARRAY['r33-first', 'r33-z', 'r33-a', 'r33-m', 'r33-b'],
    'R33.2 listByRun keeps insertion order among equal requestedAt');
SELECT is(pg_temp.ids(sandbox_persist.interrupt_list_pending('thread-r33')),
    ARRAY['r33-first', 'r33-a', 'r33-b'],
    'R33.3 listPending keeps insertion order among equal requestedAt');
SELECT is(pg_temp.ids(sandbox_persist.interrupt_list_pending_by_run('run-r33')),
    ARRAY['r33-first', 'r33-a', 'r33-b'],
    'R33.4 listPendingByRun keeps insertion order among equal requestedAt');

------------------------------------------------------------------------------
-- R1-R6: commitBatch.
------------------------------------------------------------------------------
SELECT sandbox_persist._reset_for_tests();
SELECT pg_temp.mk('pending-1', 'run-b', 'thread-b', 1);
SELECT pg_temp.mk('pending-2', 'run-b', 'thread-b', 2);
SELECT pg_temp.mk('terminal-1', 'run-b', 'thread-b', 3);
SELECT sandbox_persist.interrupt_resolve('terminal-1', '{"done":true}', 50);

SELECT * FROM pg_temp.rejects_sp($$SELECT sandbox_persist.interrupt_commit_batch(
        '[{"interruptId":"pending-1","status":"resolved","response":{"ok":1}},{"interruptId":"missing-1","status":"cancelled"}]')$$,
    'SP102 INTERRUPT_BATCH_MISSING_ID',
    'Interrupt batch references missing id: missing-1.',
    'R1.1 [pending-1 resolved, missing-1 cancelled]');
SELECT is(sandbox_persist.interrupt_get('pending-1')::jsonb,
    '{"interruptId":"pending-1","runId":"run-b","threadId":"thread-b","status":"pending","requestedAt":1,"payload":{}}'::jsonb,
    'R1.2 pending-1 is still pending with no response');
SELECT is((pg_temp.err($$SELECT sandbox_persist.interrupt_commit_batch(
        '[{"interruptId":"pending-1","status":"resolved"},{"interruptId":"missing-1","status":"cancelled"}]')$$))[2],
    'interrupt batch references a missing id',
    'R1.3 the errmsg is lowercase PostgreSQL style');

SELECT * FROM pg_temp.rejects_sp($$SELECT sandbox_persist.interrupt_commit_batch(
        '[{"interruptId":"pending-1","status":"resolved"},{"interruptId":"pending-1","status":"cancelled"}]')$$,
    'SP101 INTERRUPT_BATCH_DUPLICATE_ID',
    'Interrupt batch contains duplicate id: pending-1.',
    'R2.1 pending-1 twice');
SELECT is(sandbox_persist.interrupt_get('pending-1')->>'status', 'pending',
    'R2.2 pending-1 is still pending');

SELECT * FROM pg_temp.rejects_sp($$SELECT sandbox_persist.interrupt_commit_batch(
        '[{"interruptId":"pending-2","status":"resolved","response":"yes"},{"interruptId":"terminal-1","status":"cancelled"}]')$$,
    'SP103 INTERRUPT_BATCH_NON_PENDING_ID',
    'Interrupt batch references non-pending id: terminal-1.',
    'R3.1 [pending-2 resolved, terminal-1 cancelled] with terminal-1 resolved');
SELECT is(sandbox_persist.interrupt_get('pending-2')->>'status', 'pending',
    'R3.2 pending-2 is still pending');
SELECT is(sandbox_persist.interrupt_get('terminal-1')::jsonb,
    '{"interruptId":"terminal-1","runId":"run-b","threadId":"thread-b","status":"resolved","requestedAt":3,"resolvedAt":50,"payload":{},"response":{"done":true}}'::jsonb,
    'R3.3 terminal-1 is still resolved with its response and resolvedAt');

-- The first failing entry in array order decides, whichever check it fails.
SELECT * FROM pg_temp.rejects_sp($$SELECT sandbox_persist.interrupt_commit_batch(
        '[{"interruptId":"pending-1","status":"resolved"},{"interruptId":"missing-1","status":"cancelled"},{"interruptId":"pending-1","status":"cancelled"}]')$$,
    'SP102 INTERRUPT_BATCH_MISSING_ID',
    'Interrupt batch references missing id: missing-1.',
    'R1.4 a missing id before a later duplicate: the missing id decides');
SELECT * FROM pg_temp.rejects_sp($$SELECT sandbox_persist.interrupt_commit_batch(
        '[{"interruptId":"missing-2","status":"cancelled"},{"interruptId":"missing-2","status":"cancelled"}]')$$,
    'SP102 INTERRUPT_BATCH_MISSING_ID',
    'Interrupt batch references missing id: missing-2.',
    'R1.5 a missing id repeated: its first occurrence is missing');
SELECT * FROM pg_temp.rejects_sp($$SELECT sandbox_persist.interrupt_commit_batch(
        '[{"interruptId":"terminal-1","status":"resolved"},{"interruptId":"missing-1","status":"cancelled"}]')$$,
    'SP103 INTERRUPT_BATCH_NON_PENDING_ID',
    'Interrupt batch references non-pending id: terminal-1.',
    'R3.4 a non-pending id before a missing one: the non-pending id decides');
SELECT * FROM pg_temp.rejects_sp($$SELECT sandbox_persist.interrupt_commit_batch(
        '[{"interruptId":"terminal-1","status":"resolved"},{"interruptId":"terminal-1","status":"resolved"}]')$$,
    'SP103 INTERRUPT_BATCH_NON_PENDING_ID',
    'Interrupt batch references non-pending id: terminal-1.',
    'R3.5 a non-pending id repeated: its first occurrence is non-pending');
SELECT * FROM pg_temp.rejects_sp($$SELECT sandbox_persist.interrupt_commit_batch(
        '[{"interruptId":"pending-2","status":"resolved"},{"interruptId":"pending-1","status":"cancelled"},{"interruptId":"pending-2","status":"cancelled"}]')$$,
    'SP101 INTERRUPT_BATCH_DUPLICATE_ID',
    'Interrupt batch contains duplicate id: pending-2.',
    'R2.3 a duplicate reported on its second occurrence, after valid entries');

-- R4: a mixed valid batch, one shared resolvedAt.
SELECT pg_temp.mk('mix-r', 'run-mix', 'thread-mix', 10);
SELECT sandbox_persist.interrupt_create(
    '{"interruptId":"mix-c","runId":"run-mix","threadId":"thread-mix","requestedAt":11,"payload":{},"response":{"kept":"yes"}}');
SELECT lives_ok($$SELECT sandbox_persist.interrupt_commit_batch(
        '[{"interruptId":"mix-r","status":"resolved","response":{"approved":true}},{"interruptId":"mix-c","status":"cancelled"}]')$$,
    'R4.1 a mixed valid batch succeeds');
SELECT is(sandbox_persist.interrupt_get('mix-r')->>'status', 'resolved',
    'R4.2 the resolved entry is resolved');
SELECT is((sandbox_persist.interrupt_get('mix-r')->'response')::jsonb, '{"approved":true}'::jsonb,
    'R4.3 the resolved entry carries its response');
SELECT is(sandbox_persist.interrupt_get('mix-c')->>'status', 'cancelled',
    'R4.4 the cancelled entry is cancelled');
SELECT is((sandbox_persist.interrupt_get('mix-c')->'response')::jsonb, '{"kept":"yes"}'::jsonb,
    'R4.5 the cancelled entry''s stored response is untouched');
SELECT is(sandbox_persist.interrupt_get('mix-r')->>'resolvedAt', sandbox_persist.interrupt_get('mix-c')->>'resolvedAt',
    'R4.6 both entries share one resolvedAt (server clock)');
SELECT is(json_typeof(sandbox_persist.interrupt_get('mix-r')->'resolvedAt'), 'number',
    'R4.7 the shared resolvedAt is a number');
SELECT pg_temp.mk('mix-2a', 'run-mix', 'thread-mix', 12);
SELECT pg_temp.mk('mix-2b', 'run-mix', 'thread-mix', 13);
SELECT pg_temp.mk('mix-2c', 'run-mix', 'thread-mix', 14);
SELECT lives_ok($$SELECT sandbox_persist.interrupt_commit_batch(
        '[{"interruptId":"mix-2c","status":"cancelled"},{"interruptId":"mix-2a","status":"resolved","response":null},{"interruptId":"mix-2b","status":"resolved","response":[1]}]', 777)$$,
    'R4.8 a three-entry batch with an injected clock succeeds');
SELECT is(ARRAY(SELECT sandbox_persist.interrupt_get(x)->>'resolvedAt' FROM unnest(ARRAY['mix-2a', 'mix-2b', 'mix-2c']) x),
    ARRAY['777', '777', '777'],
    'R4.9 every entry is stamped with the one injected resolvedAt');
SELECT is(sandbox_persist.interrupt_get('mix-2a')::text,
    '{"interruptId":"mix-2a","runId":"run-mix","threadId":"thread-mix","status":"resolved","requestedAt":12,"resolvedAt":777,"payload":{},"response":null}',
    'R4.10 a resolved entry with response null stores the JSON null');
SELECT is(pg_temp.ids(sandbox_persist.interrupt_list_pending('thread-mix')), '{}'::text[],
    'R4.11 no entry of the applied batches is left pending');

-- R5: an empty batch.
SELECT pg_temp.mk('r5-pending', 'run-r5', 'thread-r5', 1);
CREATE TEMP TABLE r5 AS SELECT pg_temp.state() AS before;
SELECT lives_ok($$SELECT sandbox_persist.interrupt_commit_batch('[]')$$,
    'R5.1 an empty batch succeeds');
SELECT is(pg_temp.state(), (SELECT before FROM r5),
    'R5.2 an empty batch changes nothing');

-- R6: a resolved entry without response clears a response stored at create.
SELECT sandbox_persist.interrupt_create(
    '{"interruptId":"r6","runId":"run-r6","threadId":"thread-r6","requestedAt":1,"payload":{},"response":{"draft":true}}');
SELECT sandbox_persist.interrupt_commit_batch('[{"interruptId":"r6","status":"resolved"}]', 900);
SELECT is(sandbox_persist.interrupt_get('r6')::jsonb,
    '{"interruptId":"r6","runId":"run-r6","threadId":"thread-r6","status":"resolved","requestedAt":1,"resolvedAt":900,"payload":{}}'::jsonb,
    'R6.1 a resolved batch entry without response clears the response stored at create');

------------------------------------------------------------------------------
-- V: bad input. Fixture: v-int pending; creates use new ids so a wrongly
-- accepted call would change the state.
------------------------------------------------------------------------------
SELECT sandbox_persist._reset_for_tests();
SELECT sandbox_persist.interrupt_create(
    '{"interruptId":"v-int","runId":"v-run","threadId":"v-t","requestedAt":100,"payload":{"p":1}}');
SELECT pg_temp.mk('v-int-2', 'v-run', 'v-t', 101);

-- V1 malformed JSON text
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.interrupt_create('{"interruptId":"v-new",')$$,
    '22P02', 'V1.1 malformed JSON record to interrupt_create');
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.interrupt_resolve('v-int', '{"a":')$$,
    '22P02', 'V1.2 malformed JSON response to interrupt_resolve');
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.interrupt_commit_batch('[{"interruptId":"v-int"')$$,
    '22P02', 'V1.3 malformed JSON entries to interrupt_commit_batch');

-- V2 record not an object
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.interrupt_create('[{"interruptId":"v-new","runId":"v-run","threadId":"v-t","requestedAt":1,"payload":{}}]')$$,
    '22023', 'V2.1 interrupt record given as a JSON array');
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.interrupt_create('"v-new"')$$,
    '22023', 'V2.2 interrupt record given as a JSON string');

-- V3 wrong JSON types
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.interrupt_create('{"interruptId":"v-new","runId":"v-run","threadId":"v-t","requestedAt":"100","payload":{}}')$$,
    '22023', 'V3.1 requestedAt "100" (a string)');
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.interrupt_create('{"interruptId":7,"runId":"v-run","threadId":"v-t","requestedAt":100,"payload":{}}')$$,
    '22023', 'V3.2 interruptId 7 (a number)');
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.interrupt_create('{"interruptId":"v-new","runId":"v-run","threadId":["v-t"],"requestedAt":100,"payload":{}}')$$,
    '22023', 'V3.3 threadId given as an array');
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.interrupt_create('{"interruptId":"v-new","runId":"v-run","threadId":"v-t","requestedAt":100,"payload":[]}')$$,
    '22023', 'V3.4 payload given as an array (must be an object)');
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.interrupt_create('{"interruptId":"v-new","runId":"v-run","threadId":"v-t","requestedAt":100,"payload":"x"}')$$,
    '22023', 'V3.5 payload given as a string');
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.interrupt_create('{"interruptId":"v-new","runId":true,"threadId":"v-t","requestedAt":100,"payload":{}}')$$,
    '22023', 'V3.6 runId given as a boolean');
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.interrupt_commit_batch('[{"interruptId":5,"status":"resolved"}]')$$,
    '22023', 'V3.7 batch entry interruptId 5 (a number)');
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.interrupt_commit_batch('[{"interruptId":"v-int","status":true}]')$$,
    '22023', 'V3.8 batch entry status true (a boolean)');

-- V4 SQL NULL for a required argument
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.interrupt_create(NULL)$$,
    '22004', 'V4.1 interrupt_create(NULL)');
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.interrupt_get(NULL)$$,
    '22004', 'V4.2 interrupt_get(NULL)');
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.interrupt_resolve(NULL, '{}')$$,
    '22004', 'V4.3 interrupt_resolve(NULL, response)');
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.interrupt_cancel(NULL)$$,
    '22004', 'V4.4 interrupt_cancel(NULL)');
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.interrupt_commit_batch(NULL)$$,
    '22004', 'V4.5 interrupt_commit_batch(NULL)');
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.interrupt_list(NULL)$$,
    '22004', 'V4.6 interrupt_list(NULL)');
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.interrupt_list_pending_by_run(NULL)$$,
    '22004', 'V4.7 interrupt_list_pending_by_run(NULL)');

-- V5 required key absent or JSON null
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.interrupt_create('{"interruptId":"v-new","runId":"v-run","requestedAt":100,"payload":{}}')$$,
    '22004', 'V5.1 threadId absent');
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.interrupt_create('{"interruptId":"v-new","runId":"v-run","threadId":null,"requestedAt":100,"payload":{}}')$$,
    '22004', 'V5.2 threadId JSON null');
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.interrupt_create('{"runId":"v-run","threadId":"v-t","requestedAt":100,"payload":{}}')$$,
    '22004', 'V5.3 interruptId absent');
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.interrupt_create('{"interruptId":"v-new","threadId":"v-t","requestedAt":100,"payload":{}}')$$,
    '22004', 'V5.4 runId absent');
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.interrupt_create('{"interruptId":"v-new","runId":"v-run","threadId":"v-t","requestedAt":100}')$$,
    '22004', 'V5.5 payload absent');
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.interrupt_create('{"interruptId":"v-new","runId":"v-run","threadId":"v-t","requestedAt":100,"payload":null}')$$,
    '22004', 'V5.6 payload JSON null');
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.interrupt_create('{"interruptId":"v-new","runId":"v-run","threadId":"v-t","payload":{}}')$$,
    '22004', 'V5.7 requestedAt absent');
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.interrupt_commit_batch('[{"status":"cancelled"}]')$$,
    '22004', 'V5.8 batch entry without interruptId');
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.interrupt_commit_batch('[{"interruptId":"v-int"}]')$$,
    '22004', 'V5.9 batch entry without status');
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.interrupt_commit_batch('[{"interruptId":"v-int","status":null}]')$$,
    '22004', 'V5.10 batch entry status JSON null');

-- V6 unknown keys (the message names the key)
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.interrupt_create('{"interruptId":"v-new","runId":"v-run","threadId":"v-t","requestedAt":100,"payload":{},"requested_at":5}')$$,
    '22023', 'V6.1 unknown record key requested_at', 'requested_at');
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.interrupt_commit_batch('[{"interruptId":"v-int","status":"resolved","detached_since":1}]')$$,
    '22023', 'V6.2 unknown batch entry key detached_since', 'detached_since');
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.interrupt_commit_batch('[{"interruptId":"v-int","status":"resolved","resolvedAt":1}]')$$,
    '22023', 'V6.3 resolvedAt is not a batch entry key', 'resolvedAt');
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.interrupt_create('{"interruptId":"v-new","interruptId":"v-new2","runId":"v-run","threadId":"v-t","requestedAt":100,"payload":{}}')$$,
    '22023', 'V6.4 a repeated record key', 'interruptId');

-- V7 unknown entry status
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.interrupt_commit_batch('[{"interruptId":"v-int","status":"canceled"}]')$$,
    '22023', 'V7.1 batch entry status canceled (one l)');
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.interrupt_commit_batch('[{"interruptId":"v-int","status":"pending"}]')$$,
    '22023', 'V7.2 batch entry status pending');
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.interrupt_commit_batch('[{"interruptId":"v-int","status":"RESOLVED"}]')$$,
    '22023', 'V7.3 batch entry status RESOLVED (case matters)');
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.interrupt_commit_batch('[{"interruptId":"v-int","status":"resolved"},{"interruptId":"v-int-2","status":"done"}]')$$,
    '22023', 'V7.4 a bad status in a later entry: nothing of the batch is applied');

-- V9 fractional integers
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.interrupt_create('{"interruptId":"v-new","runId":"v-run","threadId":"v-t","requestedAt":100.5,"payload":{}}')$$,
    '22023', 'V9.1 requestedAt 100.5');

-- V10 integers beyond +/-(2^53 - 1)
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.interrupt_create('{"interruptId":"v-new","runId":"v-run","threadId":"v-t","requestedAt":9007199254740992,"payload":{}}')$$,
    '22003', 'V10.1 requestedAt 2^53');
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.interrupt_create('{"interruptId":"v-new","runId":"v-run","threadId":"v-t","requestedAt":-1e300,"payload":{}}')$$,
    '22003', 'V10.2 requestedAt -1e300');

-- V12 NaN or Infinity arriving as JSON null for a required number
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.interrupt_create('{"interruptId":"v-new","runId":"v-run","threadId":"v-t","requestedAt":null,"payload":{}}')$$,
    '22004', 'V12.1 requestedAt JSON null (NaN from JSON.stringify)');

-- V13 U+0000: refused in ids, preserved in payload and response
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.interrupt_create('{"interruptId":"v-\u0000","runId":"v-run","threadId":"v-t","requestedAt":1,"payload":{}}')$$,
    '22021', 'V13.1 interruptId containing \u0000');
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.interrupt_commit_batch('[{"interruptId":"v-int\u0000","status":"cancelled"}]')$$,
    '22021', 'V13.2 batch entry interruptId containing \u0000');
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.interrupt_get(E'v-int\x00')$$,
    '22021', 'V13.3 a text id containing U+0000 is refused by input conversion');
SELECT lives_ok($$SELECT sandbox_persist.interrupt_create('{"interruptId":"v-nul","runId":"v-run","threadId":"v-t","requestedAt":1,"payload":{"out":"\u0000ELF","k\u0000":1}}')$$,
    'V13.4 \u0000 inside a payload (opaque) is accepted');
SELECT is(sandbox_persist.interrupt_get('v-nul')::text,
    '{"interruptId":"v-nul","runId":"v-run","threadId":"v-t","status":"pending","requestedAt":1,"payload":{"out":"\u0000ELF","k\u0000":1}}',
    'V13.5 the payload with \u0000 reads back byte for byte');
SELECT sandbox_persist.interrupt_resolve('v-nul', '{"r":"\u0000","r":2}', 1);
SELECT is(sandbox_persist.interrupt_get('v-nul')::text,
    '{"interruptId":"v-nul","runId":"v-run","threadId":"v-t","status":"resolved","requestedAt":1,"resolvedAt":1,"payload":{"out":"\u0000ELF","k\u0000":1},"response":{"r":"\u0000","r":2}}',
    'V13.6 a response with \u0000 and a duplicate key reads back byte for byte');

-- V14 lone surrogate escapes: refused in ids, preserved in payload
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.interrupt_create('{"interruptId":"\ud800","runId":"v-run","threadId":"v-t","requestedAt":1,"payload":{}}')$$,
    '22021', 'V14.1 interruptId \ud800');
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.interrupt_create('{"interruptId":"v-new","runId":"r\udc00","threadId":"v-t","requestedAt":1,"payload":{}}')$$,
    '22021', 'V14.2 runId with a lone low surrogate');
SELECT lives_ok($$SELECT sandbox_persist.interrupt_create('{"interruptId":"v-sur","runId":"v-run","threadId":"v-t","requestedAt":1,"payload":{"s":"\ud800"}}')$$,
    'V14.3 a lone surrogate escape inside a payload is accepted');
SELECT is(sandbox_persist.interrupt_get('v-sur')::text,
    '{"interruptId":"v-sur","runId":"v-run","threadId":"v-t","status":"pending","requestedAt":1,"payload":{"s":"\ud800"}}',
    'V14.4 the payload with a lone surrogate escape reads back byte for byte');
SELECT is(sandbox_persist.interrupt_create('{"interruptId":"v-\ud83d\ude00","runId":"v-run","threadId":"v-t","requestedAt":1,"payload":{}}'),
    true, 'V14.5 (control) a valid surrogate pair escape is accepted');
SELECT ok(sandbox_persist.interrupt_get('v-😀') IS NOT NULL,
    'V14.6 (control) the interrupt is found under its decoded UTF-8 id');

-- V15 ids over 1024 UTF-8 bytes
SELECT * FROM pg_temp.rejects(format($$SELECT sandbox_persist.interrupt_create('{"interruptId":"%s","runId":"v-run","threadId":"v-t","requestedAt":1,"payload":{}}')$$, repeat('a', 1025)),
    '22001', 'V15.1 interruptId of 1025 bytes');
SELECT * FROM pg_temp.rejects(format($$SELECT sandbox_persist.interrupt_resolve('%s')$$, repeat('a', 1025)),
    '22001', 'V15.2 interrupt_resolve with a 1025-byte id');

-- V16 empty ids
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.interrupt_create('{"interruptId":"","runId":"v-run","threadId":"v-t","requestedAt":1,"payload":{}}')$$,
    '22023', 'V16.1 empty interruptId');
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.interrupt_create('{"interruptId":"v-new","runId":"","threadId":"v-t","requestedAt":1,"payload":{}}')$$,
    '22023', 'V16.2 empty runId');
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.interrupt_get('')$$,
    '22023', 'V16.3 interrupt_get('''')');
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.interrupt_cancel('')$$,
    '22023', 'V16.4 interrupt_cancel('''')');
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.interrupt_list_by_run('')$$,
    '22023', 'V16.5 interrupt_list_by_run('''')');
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.interrupt_commit_batch('[{"interruptId":"","status":"cancelled"}]')$$,
    '22023', 'V16.6 batch entry with an empty interruptId');

-- V18 create with status or resolvedAt
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.interrupt_create('{"interruptId":"v-new","runId":"v-run","threadId":"v-t","requestedAt":1,"payload":{},"status":"resolved"}')$$,
    '22023', 'V18.1 create with status resolved', 'status');
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.interrupt_create('{"interruptId":"v-new","runId":"v-run","threadId":"v-t","requestedAt":1,"payload":{},"status":"pending"}')$$,
    '22023', 'V18.2 create with status pending (even the birth status)', 'status');
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.interrupt_create('{"interruptId":"v-new","runId":"v-run","threadId":"v-t","requestedAt":1,"payload":{},"resolvedAt":5}')$$,
    '22023', 'V18.3 create with resolvedAt', 'resolvedAt');
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.interrupt_create('{"interruptId":"v-int","runId":"v-run","threadId":"v-t","requestedAt":100,"payload":{"p":1},"status":"resolved","resolvedAt":5}')$$,
    '22023', 'V18.4 re-create of an existing id with status and resolvedAt');
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.interrupt_create('{"interruptId":"v-new","runId":"v-run","threadId":"v-t","requestedAt":1,"payload":{},"status":null}')$$,
    '22023', 'V18.5 create with status null (the key itself is refused)');

-- V23 now_ms while the client clock is not allowed
SET LOCAL sandbox_persist.allow_client_clock = off;
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.interrupt_resolve('v-int', '{}', 5)$$,
    'SP901', 'V23.1 interrupt_resolve with now_ms while not allowed');
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.interrupt_cancel('v-int', 5)$$,
    'SP901', 'V23.2 interrupt_cancel with now_ms while not allowed');
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.interrupt_commit_batch('[{"interruptId":"v-int","status":"cancelled"}]', 5)$$,
    'SP901', 'V23.3 interrupt_commit_batch with now_ms while not allowed');
SELECT lives_ok($$SELECT sandbox_persist.interrupt_cancel('v-int-2')$$,
    'V23.4 (control) without now_ms the server clock is used');
RESET sandbox_persist.allow_client_clock;

-- V24 commitBatch argument shapes
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.interrupt_commit_batch('{"interruptId":"v-int","status":"cancelled"}')$$,
    '22023', 'V24.1 entries given as an object, not an array');
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.interrupt_commit_batch('"v-int"')$$,
    '22023', 'V24.2 entries given as a string');
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.interrupt_commit_batch('null')$$,
    '22023', 'V24.3 entries given as JSON null');
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.interrupt_commit_batch('["v-int"]')$$,
    '22023', 'V24.4 an entry that is not an object');
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.interrupt_commit_batch('[{"interruptId":"v-int","status":"cancel"}]')$$,
    '22023', 'V24.5 an unknown entry status (cancel)');
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.interrupt_commit_batch('[{"interruptId":"v-int","status":"cancelled","response":{"no":1}}]')$$,
    '22023', 'V24.6 a cancelled entry with a response');
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.interrupt_commit_batch('[{"interruptId":"v-int","status":"cancelled","response":null}]')$$,
    '22023', 'V24.7 a cancelled entry with a JSON-null response (null is a value)');
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.interrupt_commit_batch('[{"interruptId":"v-int","status":"resolved"},{"interruptId":"missing","status":"cancelled","response":1}]')$$,
    '22023', 'V24.8 a malformed later entry is refused as bad input before any state check');

SELECT * FROM finish();
ROLLBACK;
