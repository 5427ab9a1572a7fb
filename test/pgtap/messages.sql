-- pgTAP: message store (docs/contract/messages.md).
-- Cases: P01, P02, byte-faithful payloads (V13, V14 opaque parts), and the
-- message parts of V1, V2, V4, V15, V16.
-- Run with: pg_prove -d <db> test/pgtap/messages.sql (needs allow_test_reset).
BEGIN;
SELECT plan(51);
SELECT sandbox_persist._reset_for_tests();
\ir lib/foundation_helpers.psql

-- The rich transcript of the upstream suite, as JSON.stringify writes it.
CREATE FUNCTION pg_temp.rich() RETURNS text LANGUAGE sql AS $$
    SELECT '[{"role":"user","content":"plain string"},'
        || '{"role":"assistant","content":"","toolCalls":[{"id":"call-1","type":"function","function":{"name":"search","arguments":"{\"query\":\"weather in Paris\"}"}}]},'
        || '{"role":"tool","content":"{\"temperature\":21,\"unit\":\"C\"}","toolCallId":"call-1"},'
        || '{"role":"user","content":[{"type":"text","content":"What is in this image?"},{"type":"image","source":{"type":"url","value":"https://example.com/cat.png","mimeType":"image/png"}}]},'
        || '{"role":"assistant","content":"Here is my answer.","thinking":[{"content":"The user is asking about the image.","signature":"sig-1"}]}]'
$$;

------------------------------------------------------------------------------
-- P01: unknown thread, save, replace.
------------------------------------------------------------------------------
SELECT ok(sandbox_persist.message_load_thread('thread-unknown') IS NOT NULL,
    'P01.1 loading an unknown thread does not return SQL NULL');
SELECT is(sandbox_persist.message_load_thread('thread-unknown')::jsonb, '[]'::jsonb,
    'P01.2 an unknown thread loads as []');
SELECT is((SELECT count(*) FROM sandbox_persist.messages), 0::bigint,
    'P01.3 loading an unknown thread creates nothing');
SELECT lives_ok($$SELECT sandbox_persist.message_save_thread('thread-msg',
        '[{"role":"user","content":"hi"},{"role":"assistant","content":"hello"}]')$$,
    'P01.4 saving a two-message transcript succeeds');
SELECT is(sandbox_persist.message_load_thread('thread-msg')::jsonb,
    '[{"role":"user","content":"hi"},{"role":"assistant","content":"hello"}]'::jsonb,
    'P01.5 the two-message transcript round-trips');
SELECT sandbox_persist.message_save_thread('thread-msg', '[{"role":"user","content":"redo"}]');
SELECT is(sandbox_persist.message_load_thread('thread-msg')::jsonb,
    '[{"role":"user","content":"redo"}]'::jsonb,
    'P01.6 a second save with one message replaces the transcript entirely (no append)');
SELECT is((SELECT count(*) FROM sandbox_persist.messages WHERE thread_id = 'thread-msg'), 1::bigint,
    'P01.7 one transcript row per thread');
SELECT is(sandbox_persist.message_load_thread('thread-unknown')::jsonb, '[]'::jsonb,
    'P01.8 saving one thread leaves other threads unknown');
SELECT sandbox_persist.message_save_thread('thread-empty', '[{"role":"user","content":"x"}]');
SELECT sandbox_persist.message_save_thread('thread-empty', '[]');
SELECT is(sandbox_persist.message_load_thread('thread-empty')::jsonb, '[]'::jsonb,
    'P01.9 saving [] replaces a transcript with an empty one');
SELECT is((SELECT count(*) FROM sandbox_persist.messages WHERE thread_id = 'thread-empty'), 1::bigint,
    'P01.10 an empty saved transcript still exists as a row (persisted state)');

------------------------------------------------------------------------------
-- P02: rich shapes deep-equal after a round trip.
------------------------------------------------------------------------------
SELECT lives_ok(format('SELECT sandbox_persist.message_save_thread(%L, %L)', 'thread-rich', pg_temp.rich()),
    'P02.1 saving the five-message rich transcript succeeds');
SELECT is(sandbox_persist.message_load_thread('thread-rich')::jsonb, pg_temp.rich()::jsonb,
    'P02.2 the rich transcript deep-equals after a round trip');
SELECT is(sandbox_persist.message_load_thread('thread-rich')::text, pg_temp.rich(),
    'P02.3 the rich transcript is returned as the exact text saved');
SELECT is(json_typeof(sandbox_persist.message_load_thread('thread-rich')->1->'toolCalls'->0->'function'->'arguments'),
    'string',
    'P02.4 tool call arguments stay a JSON string (not parsed into an object)');
SELECT is(sandbox_persist.message_load_thread('thread-rich')->1->>'content', '',
    'P02.5 empty content stays the empty string');
SELECT is(json_array_length(sandbox_persist.message_load_thread('thread-rich')), 5,
    'P02.6 all five messages are returned, in order');
SELECT is(ARRAY(SELECT e->>'role' FROM json_array_elements(sandbox_persist.message_load_thread('thread-rich')) WITH ORDINALITY t(e, n) ORDER BY n),
    ARRAY['user', 'assistant', 'tool', 'user', 'assistant'],
    'P02.7 message order is kept');

-- Stored verbatim: key order, duplicate keys and whitespace are not rewritten.
SELECT sandbox_persist.message_save_thread('thread-dup',
    '[{"role":"user","z":1,"content":"a","z":2,"a":{"y":1,"x":2,"y":3}}]');
SELECT is(sandbox_persist.message_load_thread('thread-dup')::text,
    '[{"role":"user","z":1,"content":"a","z":2,"a":{"y":1,"x":2,"y":3}}]',
    'P02.8 key order and duplicate keys survive byte for byte');
SELECT sandbox_persist.message_save_thread('thread-ws', '[ {"role" : "user",  "content":"spaced"} ,{"n":1.50}]');
SELECT is(sandbox_persist.message_load_thread('thread-ws')::text,
    '[ {"role" : "user",  "content":"spaced"} ,{"n":1.50}]',
    'P02.9 whitespace and number spelling inside the transcript are kept (exact text)');

------------------------------------------------------------------------------
-- V13 / V14 (opaque parts): \u0000 and lone surrogate escapes are accepted
-- inside messages and preserved byte for byte.
------------------------------------------------------------------------------
SELECT lives_ok($$SELECT sandbox_persist.message_save_thread('thread-nul',
        '[{"role":"tool","content":"cat: \u0000\u0001\u00ff end","toolCallId":"c\u0000"}]')$$,
    'V13.1 a transcript containing \u0000 is accepted (jsonb would reject it)');
SELECT is(sandbox_persist.message_load_thread('thread-nul')::text,
    '[{"role":"tool","content":"cat: \u0000\u0001\u00ff end","toolCallId":"c\u0000"}]',
    'V13.2 the \u0000 transcript reads back byte for byte');
SELECT lives_ok($$SELECT sandbox_persist.message_save_thread('thread-sur',
        '[{"role":"user","content":"\ud800 then \udfff then \ud83d\ude00","\udbff":1}]')$$,
    'V14.1 a transcript with lone surrogate escapes is accepted');
SELECT is(sandbox_persist.message_load_thread('thread-sur')::text,
    '[{"role":"user","content":"\ud800 then \udfff then \ud83d\ude00","\udbff":1}]',
    'V14.2 the lone surrogate escapes read back byte for byte (not decoded or replaced)');

------------------------------------------------------------------------------
-- V: bad input; thread-msg's transcript must survive each rejected save.
------------------------------------------------------------------------------
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.message_save_thread('thread-msg', '[{"role":"user","content":')$$,
    '22P02', 'V1.1 malformed JSON transcript');
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.message_save_thread('thread-new', '[{"role":"user"},]')$$,
    '22P02', 'V1.2 malformed JSON transcript (trailing comma) for a new thread');

SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.message_save_thread('thread-msg', '{"role":"user","content":"x"}')$$,
    '22023', 'V2.1 messages given as an object');
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.message_save_thread('thread-new', '{"0":{"role":"user","content":"x"}}')$$,
    '22023', 'V2.2 messages given as an object for a new thread');
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.message_save_thread('thread-msg', '"[]"')$$,
    '22023', 'V2.3 messages given as a JSON string');
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.message_save_thread('thread-msg', '5')$$,
    '22023', 'V2.4 messages given as a JSON number');

SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.message_save_thread(NULL, '[]')$$,
    '22004', 'V4.1 message_save_thread(NULL, messages)');
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.message_save_thread('thread-msg', NULL)$$,
    '22004', 'V4.2 message_save_thread(thread, NULL)');
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.message_load_thread(NULL)$$,
    '22004', 'V4.3 message_load_thread(NULL)');

SELECT * FROM pg_temp.rejects(format('SELECT sandbox_persist.message_save_thread(%L, %L)', repeat('t', 1025), '[]'),
    '22001', 'V15.1 save with a 1025-byte thread id');
SELECT * FROM pg_temp.rejects(format('SELECT sandbox_persist.message_load_thread(%L)', repeat('t', 1025)),
    '22001', 'V15.2 load with a 1025-byte thread id');
SELECT lives_ok(format('SELECT sandbox_persist.message_save_thread(%L, %L)', repeat('é', 512), '[]'),
    'V15.3 (control) a 1024-byte thread id is accepted');

SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.message_save_thread('', '[]')$$,
    '22023', 'V16.1 save with an empty thread id');
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.message_load_thread('')$$,
    '22023', 'V16.2 load with an empty thread id');

SELECT is(sandbox_persist.message_load_thread('thread-msg')::text, '[{"role":"user","content":"redo"}]',
    'V16.3 (control) after every rejected call thread-msg still holds its transcript');

SELECT * FROM finish();
ROLLBACK;
