-- pgTAP: how checkpoint conversations are stored (docs/contract/
-- checkpoint-store.md §6, cases CV1-CV10) and collected by maintain()
-- (docs/contract/maintenance.md, action A11, cases M25.x).
-- Run with: pg_prove -d <db> test/pgtap/conversations.sql (needs allow_test_reset).
BEGIN;
SELECT plan(41);
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

-- Append checkpoint `id` on top of the thread's head with this conversation text.
CREATE FUNCTION pg_temp.append(thread text, id text, conversation text) RETURNS json LANGUAGE sql AS $$
    SELECT sandbox_persist.checkpoint_append(json_build_object(
        'checkpoint', json_build_object('id', id, 'threadId', thread,
            'parentCheckpointId', sandbox_persist.checkpoint_get_head(thread),
            'createdAt', 1, 'reason', 'automatic', 'files', '[]'::json, 'artifacts', '[]'::json),
        'expectedHeadId', sandbox_persist.checkpoint_get_head(thread),
        'writer', pg_temp.writer(thread)), conversation::json)
$$;

CREATE FUNCTION pg_temp.delete_head(thread text) RETURNS void LANGUAGE sql AS $$
    SELECT sandbox_persist.checkpoint_delete_head(json_build_object('threadId', thread,
        'checkpointId', sandbox_persist.checkpoint_get_head(thread), 'writer', pg_temp.writer(thread)))
$$;

-- The conversation of a checkpoint as the text of each message, in order.
CREATE FUNCTION pg_temp.conv(id text) RETURNS text[] LANGUAGE sql AS $$
    SELECT coalesce(array_agg(e::text ORDER BY n), '{}')
      FROM json_array_elements(sandbox_persist.checkpoint_get(id)->'conversation') WITH ORDINALITY AS t(e, n)
$$;

CREATE FUNCTION pg_temp.positions(thread text) RETURNS bigint LANGUAGE sql AS $$
    SELECT count(*) FROM sandbox_persist.conversation_log WHERE thread_id = thread
$$;
CREATE FUNCTION pg_temp.bodies(thread text) RETURNS bigint LANGUAGE sql AS $$
    SELECT count(*) FROM sandbox_persist.conversation_messages WHERE thread_id = thread
$$;
CREATE FUNCTION pg_temp.msg_seq() RETURNS bigint LANGUAGE sql AS $$
    SELECT coalesce(last_value, 0) FROM pg_sequences
     WHERE schemaname = 'sandbox_persist' AND sequencename LIKE 'conversation_messages%'
$$;
CREATE FUNCTION pg_temp.ranges(id text) RETURNS text LANGUAGE sql AS $$
    SELECT conv_ranges::text || ' block ' || conv_block::text FROM sandbox_persist.checkpoints
     WHERE checkpoint_id = id
$$;
-- n messages m1..mn, each about 100 bytes.
CREATE FUNCTION pg_temp.msgs(n int, tag text DEFAULT 'm') RETURNS text LANGUAGE sql AS $$
    SELECT '[' || coalesce(string_agg(format('{"role":"user","content":"%s%s %s"}', tag, i, repeat('x', 60)),
                                      ',' ORDER BY i), '') || ']'
      FROM generate_series(1, n) i
$$;

------------------------------------------------------------------------------
-- CV1-CV2: an append that extends its parent's transcript stores only the tail.
------------------------------------------------------------------------------
SELECT pg_temp.append('t', 'c1', pg_temp.msgs(3));
SELECT pg_temp.msg_seq() AS seq_before \gset
SELECT pg_temp.append('t', 'c2', pg_temp.msgs(5));
SELECT is(pg_temp.positions('t'), 5::bigint,
    'CV1.1 the second automatic checkpoint logs only its 2 new messages (5 positions, not 8)');
SELECT is(pg_temp.ranges('c2'), '{[0,5)} block [3,5)',
    'CV1.2 it keeps its parent''s log range and appends one block');
SELECT is(pg_temp.conv('c2'), (SELECT array_agg(e::text) FROM json_array_elements(pg_temp.msgs(5)::json) e),
    'CV1.3 it reads back every message, in order');
SELECT is(pg_temp.conv('c1'), (SELECT array_agg(e::text) FROM json_array_elements(pg_temp.msgs(3)::json) e),
    'CV1.4 the parent still reads back its 3 messages');
SELECT is(pg_temp.msg_seq() - :seq_before, 2::bigint,
    'CV2.1 the identity sequence advanced once per new message (2), not per message passed (5)');
SELECT pg_temp.append('t', 'c3', pg_temp.msgs(5));
SELECT is(pg_temp.positions('t'), 5::bigint, 'CV2.2 the same transcript again logs nothing');
SELECT is(pg_temp.ranges('c3'), '{[0,5)} block empty', 'CV2.3 and appends an empty block');
SELECT is(pg_temp.msg_seq() - :seq_before, 2::bigint, 'CV2.4 and draws no identity value');

------------------------------------------------------------------------------
-- CV3-CV6: transcripts that do not extend the parent's get a block of their own.
------------------------------------------------------------------------------
SELECT pg_temp.append('t', 'c4', pg_temp.msgs(4));
SELECT is(pg_temp.ranges('c4'), '{[5,9)} block [5,9)',
    'CV3.1 a shorter transcript (the last message dropped) is not an extension: a block of its own');
SELECT is(pg_temp.conv('c4'), (SELECT array_agg(e::text) FROM json_array_elements(pg_temp.msgs(4)::json) e),
    'CV3.2 it reads back exactly');
SELECT is(pg_temp.bodies('t'), 5::bigint, 'CV3.3 its messages are still stored once per thread (5 bodies)');
SELECT pg_temp.append('t', 'c5', replace(pg_temp.msgs(5), '"m1 ', '"M1 '));
SELECT is(pg_temp.ranges('c5'), '{[9,14)} block [9,14)',
    'CV4.1 a transcript whose first message changed is not an extension');
SELECT is((pg_temp.conv('c5'))[1], format('{"role":"user","content":"M1 %s"}', repeat('x', 60)),
    'CV4.2 it reads back with the changed message');
SELECT pg_temp.append('t', 'c6', '[{"a":1}]');
SELECT pg_temp.append('t', 'c7', '[{"a": 1},{"b":2}]');
SELECT is(pg_temp.conv('c7'), ARRAY['{"a": 1}', '{"b":2}'],
    'CV5.1 a message differing from the parent''s only in its bytes (a space) is kept byte for byte');
SELECT is(pg_temp.ranges('c7'), '{[15,17)} block [15,17)', 'CV5.2 it is not taken for an extension');
SELECT pg_temp.append('t', 'c8', E'[ {"a": 1} ,\n\t{"b":2}  , "\\u005d ],[" ]');
SELECT is(pg_temp.ranges('c8'), '{[15,18)} block [17,18)',
    'CV6.1 whitespace between elements is not part of a message: still an extension');
SELECT is(pg_temp.conv('c8'), ARRAY['{"a": 1}', '{"b":2}', '"\u005d ],["'],
    'CV6.2 a string holding an escape, brackets and a comma is one message, kept exactly');
SELECT pg_temp.append('t', 'c9', '[]');
SELECT is(pg_temp.conv('c9'), '{}'::text[], 'CV6.3 an empty conversation after a non-empty one reads back as []');

------------------------------------------------------------------------------
-- CV7: a linear chain keeps one range per checkpoint, whatever its length.
------------------------------------------------------------------------------
DO $$ BEGIN FOR i IN 1..40 LOOP PERFORM pg_temp.append('chain', 'k' || i, pg_temp.msgs(i)); END LOOP; END $$;
SELECT is(pg_temp.ranges('k40'), '{[0,40)} block [39,40)',
    'CV7.1 after 40 automatic checkpoints the last one''s conversation is still one range');
SELECT is((SELECT max(pg_column_size(conv_ranges)) FROM sandbox_persist.checkpoints WHERE thread_id = 'chain'),
          (SELECT min(pg_column_size(conv_ranges)) FROM sandbox_persist.checkpoints WHERE thread_id = 'chain'),
    'CV7.2 every checkpoint of the chain stores the same small reference, not a growing id array');
SELECT is(pg_temp.positions('chain'), 40::bigint, 'CV7.3 the thread logs 40 positions for 40 messages');
SELECT is(pg_temp.conv('k40'), (SELECT array_agg(e::text) FROM json_array_elements(pg_temp.msgs(40)::json) e),
    'CV7.4 the 40th checkpoint reads back all 40 messages');
SELECT is(json_array_length(sandbox_persist.checkpoint_list('chain')), 40, 'CV7.5 the list holds 40 checkpoints');

------------------------------------------------------------------------------
-- CV8: a fork root owns a copy of its conversation in the destination thread.
------------------------------------------------------------------------------
SELECT sandbox_persist.checkpoint_fork_from_checkpoint(json_build_object(
    'sourceThreadId', 'chain', 'sourceCheckpointId', 'k3', 'destinationThreadId', 'fork',
    'destinationCheckpointId', 'f1', 'createdAt', 2, 'writer', pg_temp.writer('fork')));
SELECT is(pg_temp.bodies('fork'), 3::bigint, 'CV8.1 the destination thread holds its own 3 message bodies');
SELECT is(pg_temp.ranges('f1'), '{[0,3)} block [0,3)', 'CV8.2 the fork root''s conversation is its own block');
SELECT is(pg_temp.conv('f1'), pg_temp.conv('k3'), 'CV8.3 it reads back the source''s conversation');
SELECT pg_temp.append('fork', 'f2', pg_temp.msgs(4));
SELECT is(pg_temp.ranges('f2'), '{[0,4)} block [3,4)', 'CV8.4 appends on the fork root extend it');

------------------------------------------------------------------------------
-- M25: A11 collects the positions of deleted heads, then unreferenced messages.
------------------------------------------------------------------------------
SELECT pg_temp.append('g', 'g1', '["keep", "shared"]');
SELECT pg_temp.append('g', 'g2', '["keep", "shared", "gone-1", "shared", "gone-2"]');
SELECT pg_temp.delete_head('g');
SELECT is((SELECT count(*) FROM sandbox_persist.conversation_garbage WHERE thread_id = 'g'), 1::bigint,
    'M25.1 deleteHead queues the block its checkpoint appended');
SELECT is(pg_temp.positions('g'), 5::bigint, 'M25.2 and leaves its positions to maintenance');
SELECT sandbox_persist.checkpoint_list('g')::text AS g_list \gset
SELECT is((SELECT block::text FROM sandbox_persist.conversation_garbage WHERE thread_id = 'g'), '[2,5)',
    'M25.3 the queued block is the 3 positions g2 appended');
SELECT sandbox_persist.maintain(1000) AS m25 \gset
SELECT is((:'m25'::jsonb)->'conversationPositionsDeleted', '3'::jsonb,
    'M25.4 maintain deletes the 3 positions of the deleted head');
SELECT is((:'m25'::jsonb)->'conversationMessagesDeleted', '2'::jsonb,
    'M25.5 and the 2 messages only they named; "shared" is still named by g1 and kept');
SELECT is(pg_temp.bodies('g'), 2::bigint, 'M25.6 two bodies are left');
SELECT is(sandbox_persist.checkpoint_list('g')::text, :'g_list', 'M25.7 the remaining checkpoint reads back identically');
SELECT is((SELECT count(*) FROM sandbox_persist.conversation_garbage), 0::bigint, 'M25.8 the queue is empty');
SELECT pg_temp.append('g', 'g3', '["keep", "shared", "gone-1"]');
SELECT is(pg_temp.conv('g3'), ARRAY['"keep"', '"shared"', '"gone-1"'],
    'M25.9 a collected message appended again is stored again and reads back');

-- max_rows bounds the positions per call; repeated calls converge.
SELECT pg_temp.append('b', 'b1', pg_temp.msgs(5, 'b'));
SELECT pg_temp.delete_head('b');
SELECT is((sandbox_persist.maintain(2)->>'conversationPositionsDeleted')::int, 2,
    'M25.10 maintain(2) deletes exactly 2 positions');
SELECT is((sandbox_persist.maintain(2)->>'conversationPositionsDeleted')::int, 2, 'M25.11 then 2 more');
SELECT is((sandbox_persist.maintain(2)->>'conversationPositionsDeleted')::int, 1, 'M25.12 then the last one');
SELECT is((SELECT count(*) FROM sandbox_persist.conversation_garbage) + pg_temp.positions('b') + pg_temp.bodies('b'),
    0::bigint, 'M25.13 the queue, the positions and the bodies of the thread are all gone');
SELECT is(sandbox_persist.maintain(2)->>'conversationPositionsDeleted', '0', 'M25.14 a further call finds nothing');

SELECT * FROM finish();
ROLLBACK;
