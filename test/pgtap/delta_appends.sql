-- pgTAP: delta appends (docs/contract/checkpoint-store.md §3, §4 and §6,
-- cases CD1-CD7): checkpoint_append_delta ships only the messages after the
-- parent's conversation with a claim (length, digest) about it; a true claim
-- stores what checkpoint_append stores for the whole conversation, a false
-- one is SP016 and changes nothing.
-- Run with: pg_prove -d <db> test/pgtap/delta_appends.sql (needs allow_test_reset).
BEGIN;
SELECT plan(31);
SELECT sandbox_persist._reset_for_tests();

------------------------------------------------------------------------------
-- Helpers (temporary, gone at ROLLBACK).
------------------------------------------------------------------------------
CREATE TEMP TABLE w (thread text PRIMARY KEY, writer json NOT NULL);

CREATE FUNCTION pg_temp.writer(thread text) RETURNS json LANGUAGE plpgsql AS $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM w WHERE w.thread = $1) THEN
        INSERT INTO w VALUES ($1, sandbox_persist.checkpoint_acquire_writer($1, 3600000));
    END IF;
    RETURN (SELECT writer FROM w WHERE w.thread = $1);
END
$$;

CREATE FUNCTION pg_temp.input(thread text, id text, writer json) RETURNS json LANGUAGE sql AS $$
    SELECT json_build_object(
        'checkpoint', json_build_object('id', id, 'threadId', thread,
            'parentCheckpointId', sandbox_persist.checkpoint_get_head(thread),
            'createdAt', 1, 'reason', 'automatic', 'files', '[]'::json, 'artifacts', '[]'::json),
        'expectedHeadId', sandbox_persist.checkpoint_get_head(thread),
        'writer', writer)
$$;

-- Whole form: checkpoint `id` on top of the thread's head.
CREATE FUNCTION pg_temp.append(thread text, id text, conversation text) RETURNS json LANGUAGE sql AS $$
    SELECT sandbox_persist.checkpoint_append(pg_temp.input(thread, id, pg_temp.writer(thread)),
                                             conversation::json)
$$;

-- Delta form with an explicit claim.
CREATE FUNCTION pg_temp.delta(thread text, id text, tail text, len bigint, digest bytea)
RETURNS json LANGUAGE sql AS $$
    SELECT sandbox_persist.checkpoint_append_delta(pg_temp.input(thread, id, pg_temp.writer(thread)),
                                                   tail::json, len, digest)
$$;

-- The digest a client computes for a conversation: d0 = sha256(''),
-- di = sha256(d(i-1) || sha256(text of message i)).
CREATE FUNCTION pg_temp.digest(conversation text) RETURNS bytea LANGUAGE plpgsql AS $$
DECLARE
    d bytea := sha256(''::bytea);
    e text;
BEGIN
    FOR e IN SELECT x::text FROM json_array_elements(conversation::json) WITH ORDINALITY AS t(x, n) ORDER BY n LOOP
        d := sha256(d || sha256(convert_to(e, 'UTF8')));
    END LOOP;
    RETURN d;
END
$$;

-- n messages m(from)..m(n), each about 100 bytes.
CREATE FUNCTION pg_temp.msgs(n int, first int DEFAULT 1) RETURNS text LANGUAGE sql AS $$
    SELECT '[' || coalesce(string_agg(format('{"role":"user","content":"m%s %s"}', i, repeat('x', 60)),
                                      ',' ORDER BY i), '') || ']'
      FROM generate_series(first, n) i
$$;

-- What a checkpoint stores for its conversation, for comparing two threads.
CREATE FUNCTION pg_temp.stored(id text) RETURNS text LANGUAGE sql AS $$
    SELECT conv_ranges::text || ' block ' || conv_block::text || ' len ' || conv_len
           || ' digest ' || encode(conv_digest, 'hex')
      FROM sandbox_persist.checkpoints WHERE checkpoint_id = id
$$;
CREATE FUNCTION pg_temp.conv(id text) RETURNS text LANGUAGE sql AS $$
    SELECT (sandbox_persist.checkpoint_get(id)->'conversation')::text
$$;
-- Everything a failed call could have changed on a thread.
CREATE FUNCTION pg_temp.state(thread text) RETURNS text LANGUAGE sql AS $$
    SELECT coalesce(t.head_id, '-') || ' end ' || t.conv_log_end
           || ' ckpts ' || (SELECT count(*) FROM sandbox_persist.checkpoints c WHERE c.thread_id = thread)
           || ' pos ' || (SELECT coalesce(sum(b.message_count), 0) FROM sandbox_persist.conversation_blocks b
                           WHERE b.thread_id = thread)
           || ' blocks ' || (SELECT count(*) FROM sandbox_persist.conversation_blocks b WHERE b.thread_id = thread)
      FROM sandbox_persist.checkpoint_threads t WHERE t.thread_id = thread
$$;

------------------------------------------------------------------------------
-- CD1: a true claim stores what the whole form stores.
------------------------------------------------------------------------------
SELECT pg_temp.append('whole', 'w1', pg_temp.msgs(3));
SELECT pg_temp.append('whole', 'w2', pg_temp.msgs(5));
SELECT pg_temp.append('whole', 'w3', pg_temp.msgs(5));
SELECT pg_temp.append('whole', 'w4', pg_temp.msgs(9));
SELECT pg_temp.append('delta', 'd1', pg_temp.msgs(3));
SELECT is(pg_temp.delta('delta', 'd2', pg_temp.msgs(5, 4), 3, pg_temp.digest(pg_temp.msgs(3)))::text,
    '{"headId":"d2"}', 'CD1.1 a true claim is accepted and returns the new head');
SELECT pg_temp.delta('delta', 'd3', '[]', 5, pg_temp.digest(pg_temp.msgs(5)));
SELECT pg_temp.delta('delta', 'd4', pg_temp.msgs(9, 6), 5, pg_temp.digest(pg_temp.msgs(5)));
SELECT is(pg_temp.conv('d2'), pg_temp.conv('w2'), 'CD1.2 the conversation reads back as the whole form''s');
SELECT is(pg_temp.conv('d4'), pg_temp.conv('w4'), 'CD1.3 ... after an empty tail too');
SELECT is(replace(pg_temp.stored('d2'), 'd', 'w'), replace(pg_temp.stored('w2'), 'd', 'w'),
    'CD1.4 ranges, block, length and digest equal the whole form''s');
SELECT is(pg_temp.stored('d3'), pg_temp.stored('w3'), 'CD1.5 an empty tail stores an empty block, as the whole form');
SELECT is(pg_temp.stored('d4'), pg_temp.stored('w4'), 'CD1.6 a longer chain still equals the whole form');
SELECT is(pg_temp.state('delta'), replace(pg_temp.state('whole'), 'w4', 'd4'),
    'CD1.7 log, messages and head equal the whole form''s');
SELECT is((SELECT conv_digest FROM sandbox_persist.checkpoints WHERE checkpoint_id = 'd4'),
    pg_temp.digest(pg_temp.msgs(9)), 'CD1.8 the stored digest is the chain a client computes');
-- the whole form still recognises a delta-appended parent as a prefix
SELECT pg_temp.append('delta', 'd5', pg_temp.msgs(10));
SELECT is(pg_temp.stored('d5') LIKE '{[0,10)} block [9,10)%', true,
    'CD1.9 a whole append after delta ones extends them (one new position)');

------------------------------------------------------------------------------
-- CD2-CD3: a false claim is SP016 and changes nothing.
------------------------------------------------------------------------------
SELECT pg_temp.state('delta') AS before \gset
SELECT throws_ok($$SELECT pg_temp.delta('delta', 'bad', pg_temp.msgs(11, 11), 9, pg_temp.digest(pg_temp.msgs(9)))$$,
    'SP016', NULL, 'CD2.1 a claim shorter than the parent''s conversation is SP016');
SELECT throws_ok($$SELECT pg_temp.delta('delta', 'bad', pg_temp.msgs(12, 12), 11, pg_temp.digest(pg_temp.msgs(10)))$$,
    'SP016', NULL, 'CD2.2 a claim longer than the parent''s conversation is SP016');
SELECT throws_ok($$SELECT pg_temp.delta('delta', 'bad', pg_temp.msgs(11, 11), 10, pg_temp.digest(pg_temp.msgs(9)))$$,
    'SP016', NULL, 'CD3.1 the right length with another conversation''s digest is SP016');
SELECT throws_ok($$SELECT pg_temp.delta('delta', 'bad', pg_temp.msgs(11, 11), 10, '\x00'::bytea)$$,
    'SP016', NULL, 'CD3.2 a digest of the wrong size is SP016');
SELECT throws_ok($$SELECT pg_temp.delta('delta', 'bad', pg_temp.msgs(11, 11), 10,
                                         pg_temp.digest(replace(pg_temp.msgs(10), 'm1 ', 'M1 ')))$$,
    'SP016', NULL, 'CD3.3 one changed message in the prefix makes the digest false: SP016');
SELECT throws_ok($$SELECT pg_temp.delta('delta', 'bad', pg_temp.msgs(11, 11), 10, pg_temp.digest(pg_temp.msgs(9)))$$,
    'SP016', 'conversation prefix claim does not match the parent', 'CD3.4 the message names the claim');
SELECT is(pg_temp.state('delta'), :'before', 'CD3.5 refused claims changed no head, position, message or checkpoint');
SELECT is(sandbox_persist.checkpoint_get('bad')::text, NULL, 'CD3.6 no checkpoint was stored');

------------------------------------------------------------------------------
-- CD4: the append checks come first: writer, head and parent.
------------------------------------------------------------------------------
SELECT throws_ok($$SELECT sandbox_persist.checkpoint_append_delta(
        pg_temp.input('delta', 'bad', pg_temp.writer('whole')), '[]', 10, pg_temp.digest(pg_temp.msgs(10)))$$,
    'SP006', NULL, 'CD4.1 another thread''s writer is SP006, before the claim');
SELECT throws_ok($$SELECT sandbox_persist.checkpoint_append_delta(
        pg_temp.input('delta', 'bad', (pg_temp.writer('delta')::jsonb || '{"fence": 999}')::json), '[]',
        10, pg_temp.digest(pg_temp.msgs(10)))$$,
    'SP006', NULL, 'CD4.2 a stale writer is SP006');
SELECT throws_ok($$SELECT sandbox_persist.checkpoint_append_delta(
        (pg_temp.input('delta', 'bad', pg_temp.writer('delta'))::jsonb || '{"expectedHeadId": "d4"}')::json,
        '[]', 9, pg_temp.digest(pg_temp.msgs(9)))$$,
    'SP001', NULL, 'CD4.3 a claim about a parent that is no longer the head is SP001 (stale head), true or not');
SELECT throws_ok($$SELECT sandbox_persist.checkpoint_append_delta(
        (pg_temp.input('delta', 'bad', pg_temp.writer('delta'))::jsonb
          || '{"checkpoint": {"id": "bad", "threadId": "delta", "parentCheckpointId": "d4", "createdAt": 1,
               "reason": "automatic", "files": [], "artifacts": []}}')::json,
        '[]', 9, pg_temp.digest(pg_temp.msgs(9)))$$,
    'SP002', NULL, 'CD4.4 a parent other than the expected head is SP002');
SELECT throws_ok($$SELECT pg_temp.delta('delta', 'd1', '[]', 10, pg_temp.digest(pg_temp.msgs(10)))$$,
    'SP003', NULL, 'CD4.5 an existing id is SP003');
SELECT is(pg_temp.state('delta'), :'before', 'CD4.6 none of them changed anything');

------------------------------------------------------------------------------
-- CD5: a root's parent conversation is empty.
------------------------------------------------------------------------------
SELECT throws_ok($$SELECT pg_temp.delta('root', 'r0', pg_temp.msgs(2), 1, pg_temp.digest(pg_temp.msgs(1)))$$,
    'SP016', NULL, 'CD5.1 a root with a non-empty claim is SP016');
SELECT is(pg_temp.delta('root', 'r1', pg_temp.msgs(2), 0, sha256(''::bytea))::text, '{"headId":"r1"}',
    'CD5.2 a root with the empty claim (0, sha256 of nothing) is accepted');
SELECT is(pg_temp.conv('r1'), (SELECT (json_build_object('c', pg_temp.msgs(2)::json)->'c')::text),
    'CD5.3 ... and stores the tail as its conversation');

------------------------------------------------------------------------------
-- CD6: malformed claims and tails are SP008 and change nothing.
------------------------------------------------------------------------------
SELECT pg_temp.state('delta') AS before \gset
SELECT throws_ok($$SELECT pg_temp.delta('delta', 'bad', '[]', NULL, pg_temp.digest(pg_temp.msgs(10)))$$,
    'SP008', NULL, 'CD6.1 a NULL prefix_len is SP008');
SELECT throws_ok($$SELECT pg_temp.delta('delta', 'bad', '[]', -1, pg_temp.digest(pg_temp.msgs(10)))$$,
    'SP008', NULL, 'CD6.2 a negative prefix_len is SP008');
SELECT throws_ok($$SELECT pg_temp.delta('delta', 'bad', '[]', 10, NULL)$$,
    'SP008', NULL, 'CD6.3 a NULL prefix_digest is SP008');
SELECT throws_ok($$SELECT pg_temp.delta('delta', 'bad', '{"role":"user"}', 10, pg_temp.digest(pg_temp.msgs(10)))$$,
    'SP008', NULL, 'CD6.4 a tail that is not an array is SP008');
SELECT is(pg_temp.state('delta'), :'before', 'CD6.5 none of them changed anything');

SELECT * FROM finish();
ROLLBACK;
