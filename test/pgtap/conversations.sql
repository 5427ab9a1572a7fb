-- pgTAP: how checkpoint conversations are stored (docs/contract/
-- checkpoint-store.md §6, cases CV1-CV10) and collected by maintain()
-- (docs/contract/maintenance.md, action A11, cases M25.x).
-- Run with: pg_prove -d <db> test/pgtap/conversations.sql (needs allow_test_reset).
BEGIN;
SELECT plan(53);
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

-- The log positions a thread's blocks hold, and its block rows.
CREATE FUNCTION pg_temp.positions(thread text) RETURNS bigint LANGUAGE sql AS $$
    SELECT coalesce(sum(message_count), 0) FROM sandbox_persist.conversation_blocks WHERE thread_id = thread
$$;
CREATE FUNCTION pg_temp.blocks(thread text) RETURNS bigint LANGUAGE sql AS $$
    SELECT count(*) FROM sandbox_persist.conversation_blocks WHERE thread_id = thread
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
SELECT pg_temp.append('t', 'c2', pg_temp.msgs(5));
SELECT is(pg_temp.positions('t'), 5::bigint,
    'CV1.1 the second automatic checkpoint logs only its 2 new messages (5 positions, not 8)');
SELECT is(pg_temp.ranges('c2'), '{[0,5)} block [3,5)',
    'CV1.2 it keeps its parent''s log range and appends one block');
SELECT is(pg_temp.conv('c2'), (SELECT array_agg(e::text) FROM json_array_elements(pg_temp.msgs(5)::json) e),
    'CV1.3 it reads back every message, in order');
SELECT is(pg_temp.conv('c1'), (SELECT array_agg(e::text) FROM json_array_elements(pg_temp.msgs(3)::json) e),
    'CV1.4 the parent still reads back its 3 messages');
SELECT is(pg_temp.blocks('t'), 2::bigint,
    'CV2.1 the 2 new messages are one row, as the parent''s 3 are: a row per append, not per message');
SELECT pg_temp.append('t', 'c3', pg_temp.msgs(5));
SELECT is(pg_temp.positions('t'), 5::bigint, 'CV2.2 the same transcript again logs nothing');
SELECT is(pg_temp.ranges('c3'), '{[0,5)} block empty', 'CV2.3 and appends an empty block');
SELECT is(pg_temp.blocks('t'), 2::bigint, 'CV2.4 and stores no row');

------------------------------------------------------------------------------
-- CV3-CV6: transcripts that do not extend the parent's get a block of their own.
------------------------------------------------------------------------------
SELECT pg_temp.append('t', 'c4', pg_temp.msgs(4));
SELECT is(pg_temp.ranges('c4'), '{[0,3),[5,6)} block [5,6)',
    'CV3.1 a shorter transcript (the last message dropped) is not an extension: it keeps the parent''s first block, which it repeats whole, and stores the 4th message in a block of its own');
SELECT is(pg_temp.conv('c4'), (SELECT array_agg(e::text) FROM json_array_elements(pg_temp.msgs(4)::json) e),
    'CV3.2 it reads back exactly');
SELECT is(pg_temp.blocks('t') || ' rows, ' || pg_temp.positions('t') || ' positions', '3 rows, 6 positions',
    'CV3.3 only that message is stored again');
SELECT pg_temp.append('t', 'c4b', pg_temp.msgs(3));
SELECT is(pg_temp.ranges('c4b') || ', ' || pg_temp.blocks('t') || ' rows', '{[0,3)} block empty, 3 rows',
    'CV3.4 a transcript that is exactly the parent''s first block stores nothing');
SELECT is(pg_temp.conv('c4b'), (SELECT array_agg(e::text) FROM json_array_elements(pg_temp.msgs(3)::json) e),
    'CV3.5 and reads back exactly');
SELECT pg_temp.append('t', 'c5', replace(pg_temp.msgs(5), '"m1 ', '"M1 '));
SELECT is(pg_temp.ranges('c5'), '{[6,11)} block [6,11)',
    'CV4.1 a transcript whose first message changed is not an extension');
SELECT is((pg_temp.conv('c5'))[1], format('{"role":"user","content":"M1 %s"}', repeat('x', 60)),
    'CV4.2 it reads back with the changed message');
SELECT pg_temp.append('t', 'c6', '[{"a":1}]');
SELECT pg_temp.append('t', 'c7', '[{"a": 1},{"b":2}]');
SELECT is(pg_temp.conv('c7'), ARRAY['{"a": 1}', '{"b":2}'],
    'CV5.1 a message differing from the parent''s only in its bytes (a space) is kept byte for byte');
SELECT is(pg_temp.ranges('c7'), '{[12,14)} block [12,14)', 'CV5.2 it is not taken for an extension, nor for the parent''s block');
SELECT pg_temp.append('t', 'c8', E'[ {"a": 1} ,\n\t{"b":2}  , "\\u005d ],[" ]');
SELECT is(pg_temp.ranges('c8'), '{[12,15)} block [14,15)',
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
SELECT is(pg_temp.blocks('fork') || ' row, ' || pg_temp.positions('fork') || ' positions', '1 row, 3 positions',
    'CV8.1 the destination thread holds its own copy of the 3 messages, in one row');
SELECT is(pg_temp.ranges('f1'), '{[0,3)} block [0,3)', 'CV8.2 the fork root''s conversation is its own block');
SELECT is(pg_temp.conv('f1'), pg_temp.conv('k3'), 'CV8.3 it reads back the source''s conversation');
SELECT pg_temp.append('fork', 'f2', pg_temp.msgs(4));
SELECT is(pg_temp.ranges('f2'), '{[0,4)} block [3,4)', 'CV8.4 appends on the fork root extend it');

------------------------------------------------------------------------------
-- CV9: a block is one compressed row; a conversation reads one row per block.
------------------------------------------------------------------------------
SELECT pg_temp.append('z', 'z1', pg_temp.msgs(2, 'z'));
SELECT is((SELECT array_agg(pg_column_compression(bodies) || ' ' || (pg_column_size(bodies) < octet_length(bodies))
                            ORDER BY thread_id, first_pos)
             FROM sandbox_persist.conversation_blocks WHERE first_pos = 0 AND thread_id IN ('t', 'z')),
    ARRAY['lz4 true', 'lz4 true'],
    'CV9.1 a block of a few short messages (well under the 2 kB at which the server compresses) is stored compressed, the session''s first block too');
SELECT is(pg_temp.conv('z1'), (SELECT array_agg(e::text) FROM json_array_elements(pg_temp.msgs(2, 'z')::json) e),
    'CV9.2 and reads back exactly');
CREATE FUNCTION pg_temp.block_rows_read() RETURNS bigint LANGUAGE sql AS $$
    SELECT idx_tup_fetch FROM pg_stat_xact_user_tables WHERE relid = 'sandbox_persist.conversation_blocks'::regclass
$$;
SELECT pg_temp.block_rows_read() AS reads_before \gset
SELECT sandbox_persist.checkpoint_get('c2') IS NOT NULL;
SELECT is(pg_temp.block_rows_read() - :reads_before, 2::bigint,
    'CV9.3 reading c2 (5 messages, appended as 3 then 2) fetches its 2 block rows');

------------------------------------------------------------------------------
-- CV10: checkpoint_get_parts reads a checkpoint a block a row.
------------------------------------------------------------------------------
-- The rows of checkpoint_get_parts(id) joined back into one record's text.
CREATE FUNCTION pg_temp.parts_joined(id text) RETURNS text LANGUAGE sql AS $$
    WITH p AS (SELECT x::text AS part, n FROM sandbox_persist.checkpoint_get_parts(id) WITH ORDINALITY AS t(x, n))
    SELECT replace((SELECT part FROM p WHERE n = 1), '"conversation":[]', '"conversation":['
                   || coalesce((SELECT string_agg(substr(part, 2, length(part) - 2), ',' ORDER BY n)
                                  FROM p WHERE n > 1), '') || ']')
$$;
SELECT is((SELECT count(*) FILTER (WHERE pg_temp.parts_joined(checkpoint_id)
                                   IS DISTINCT FROM sandbox_persist.checkpoint_get(checkpoint_id)::text)
             FROM sandbox_persist.checkpoints),
    0::bigint, 'CV10.1 every checkpoint here (extensions, shared blocks, edits, escapes, an empty one, a chain, a fork root) joins back from its parts to exactly checkpoint_get''s text');
SELECT is((SELECT count(*) FROM sandbox_persist.checkpoints), 53::bigint,
    'CV10.2 those are the 53 checkpoints of the cases above');
SELECT is((SELECT array_agg(json_typeof(x) || ' ' || json_array_length(coalesce(x->'conversation', x)) ORDER BY n)
             FROM sandbox_persist.checkpoint_get_parts('c2') WITH ORDINALITY AS t(x, n)),
    ARRAY['object 0', 'array 3', 'array 2'],
    'CV10.3 c2 (appended as 3 then 2 messages) is its record with "conversation":[], then a row per block');
SELECT is((SELECT array_agg(x::text) FROM (SELECT sandbox_persist.checkpoint_get_parts('k40') AS x) s),
          (SELECT array_agg(x::text ORDER BY n) FROM sandbox_persist.checkpoint_get_parts('k40') WITH ORDINALITY AS t(x, n)),
    'CV10.4 called in a select list (rows made as they are read) it returns the same rows in the same order');
SELECT is((SELECT count(*) FROM sandbox_persist.checkpoint_get_parts('c9')), 1::bigint,
    'CV10.5 an empty conversation is the record alone');
SELECT is((SELECT count(*) FROM sandbox_persist.checkpoint_get_parts('no-such-checkpoint')), 0::bigint,
    'CV10.6 an unknown checkpoint has no rows');
CREATE FUNCTION pg_temp.portals() RETURNS bigint LANGUAGE sql AS $$
    SELECT count(*) FROM pg_backend_memory_contexts WHERE name = 'PortalContext'
$$;
SELECT pg_temp.portals() AS portals_before \gset
SELECT count(*) FROM (SELECT sandbox_persist.checkpoint_get_parts('k40') LIMIT 2) s;
SELECT is(pg_temp.portals(), :portals_before::bigint,
    'CV10.7 a reader that stops early (LIMIT 2 of 41 rows) leaves no cursor open in the transaction');

------------------------------------------------------------------------------
-- M25: A11 deletes the blocks of deleted heads.
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
SELECT is((:'m25'::jsonb)->'conversationMessagesDeleted', '3'::jsonb,
    'M25.5 and the 3 messages its block held (a block holds its own copy of "shared")');
SELECT is(pg_temp.blocks('g') || ' row, ' || pg_temp.positions('g') || ' positions', '1 row, 2 positions',
    'M25.6 g1''s block is left');
SELECT is(sandbox_persist.checkpoint_list('g')::text, :'g_list', 'M25.7 the remaining checkpoint reads back identically');
SELECT is((SELECT count(*) FROM sandbox_persist.conversation_garbage), 0::bigint, 'M25.8 the queue is empty');
SELECT pg_temp.append('g', 'g3', '["keep", "shared", "gone-1"]');
SELECT is(pg_temp.conv('g3'), ARRAY['"keep"', '"shared"', '"gone-1"'],
    'M25.9 a collected message appended again is stored again and reads back');

-- max_rows bounds the queued blocks per call; repeated calls converge.
SELECT pg_temp.append('b', 'b1', pg_temp.msgs(5, 'b'));
SELECT pg_temp.append('b', 'b2', pg_temp.msgs(6, 'b'));
SELECT pg_temp.append('b', 'b3', pg_temp.msgs(7, 'b'));
SELECT pg_temp.delete_head('b');
SELECT pg_temp.delete_head('b');
SELECT pg_temp.delete_head('b');
SELECT sandbox_persist.maintain(2)->>'conversationPositionsDeleted' AS m25_10 \gset
SELECT is(:'m25_10' || ' positions, ' || (SELECT count(*) FROM sandbox_persist.conversation_garbage) || ' queued',
    '6 positions, 1 queued', 'M25.10 maintain(2) deletes exactly 2 blocks (5 + 1 positions), the first in log order');
SELECT is((sandbox_persist.maintain(2)->>'conversationPositionsDeleted')::int, 1, 'M25.11 then the last one');
SELECT is(pg_temp.blocks('b'), 0::bigint, 'M25.12 no block of the thread is left');
SELECT is((SELECT count(*) FROM sandbox_persist.conversation_garbage) + pg_temp.positions('b'),
    0::bigint, 'M25.13 the queue and the positions of the thread are all gone');
SELECT is(sandbox_persist.maintain(2)->>'conversationPositionsDeleted', '0', 'M25.14 a further call finds nothing');

SELECT * FROM finish();
ROLLBACK;
