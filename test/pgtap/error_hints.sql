-- pgTAP: every error hint that names a call or a value works as written
-- (docs/contract/README.md §4.1, §8.3). Cases EH1-EH16: for each such hint of
-- SP_ERROR_TABLE (src/errors.h), a call raises the error with the table's
-- hint, the hint names the call or value, and that call or value then
-- succeeds where the refused one did not. EH1 keeps the list complete: a hint
-- that names a function of the extension, a setting or a number has a case here.
-- Run with: pg_prove -d <db> test/pgtap/error_hints.sql (as a superuser,
-- needs allow_test_reset; allow_client_clock is changed with SET LOCAL).
BEGIN;
SELECT plan(60);
SELECT sandbox_persist._reset_for_tests();
SET LOCAL sandbox_persist.allow_client_clock = on;
SET LOCAL sandbox_persist.test_timeline = 1;

------------------------------------------------------------------------------
-- Helpers (temporary, gone at ROLLBACK).
------------------------------------------------------------------------------

-- The hint of a SQLSTATE in the error table (error_codes()).
CREATE FUNCTION pg_temp.hint(code text) RETURNS text LANGUAGE sql AS $$
    SELECT c->>'hint' FROM json_array_elements(sandbox_persist.error_codes()) c WHERE c->>'sqlstate' = code
$$;

-- 'SQLSTATE hint' of the error a statement raises ('SQLSTATE <no hint>'
-- without one), or 'no error'. The attempt is always undone.
CREATE FUNCTION pg_temp.raised(stmt text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    st text; h text;
BEGIN
    BEGIN
        EXECUTE stmt;
        RAISE EXCEPTION USING ERRCODE = 'ZZ999', MESSAGE = 'no error';
    EXCEPTION WHEN OTHERS THEN
        GET STACKED DIAGNOSTICS st = RETURNED_SQLSTATE, h = PG_EXCEPTION_HINT;
    END;
    IF st = 'ZZ999' THEN
        RETURN 'no error';
    END IF;
    RETURN st || ' ' || coalesce(nullif(h, ''), '<no hint>');
END
$$;

-- What a refused call must raise: its SQLSTATE and the table's hint.
CREATE FUNCTION pg_temp.refused(code text) RETURNS text LANGUAGE sql AS $$
    SELECT code || ' ' || pg_temp.hint(code)
$$;

-- Whether the hint of `code` names `words` (as written).
CREATE FUNCTION pg_temp.names(code text, words text) RETURNS boolean LANGUAGE sql AS $$
    SELECT position(words IN pg_temp.hint(code)) > 0
$$;

-- Checkpoints: the writer of a thread (acquired once), and the append input
-- {checkpoint, expectedHeadId, writer} of checkpoint `id` with `parent`.
CREATE TEMP TABLE writers (thread_id text PRIMARY KEY, writer json NOT NULL);
CREATE FUNCTION pg_temp.w(thread text) RETURNS json LANGUAGE plpgsql AS $$
DECLARE
    r json;
BEGIN
    SELECT writer INTO r FROM pg_temp.writers WHERE thread_id = thread;
    IF r IS NULL THEN
        r := sandbox_persist.checkpoint_acquire_writer(thread);
        INSERT INTO pg_temp.writers VALUES (thread, r);
    END IF;
    RETURN r;
END
$$;
CREATE FUNCTION pg_temp.input(thread text, id text, parent text, expected text) RETURNS json
LANGUAGE sql AS $$
    SELECT json_build_object(
        'checkpoint', json_build_object('id', id, 'threadId', thread, 'parentCheckpointId', parent,
                                        'createdAt', 1, 'reason', 'automatic',
                                        'files', '[]'::json, 'artifacts', '[]'::json),
        'expectedHeadId', expected, 'writer', pg_temp.w(thread))
$$;
-- checkpoint_append of that input with the conversation [{role: user, content: id}], as SQL text.
CREATE FUNCTION pg_temp.q_append(thread text, id text, parent text, expected text) RETURNS text
LANGUAGE sql AS $$
    SELECT format('SELECT sandbox_persist.checkpoint_append(%L::json, %L::json)',
                  pg_temp.input(thread, id, parent, expected),
                  json_build_array(json_build_object('role', 'user', 'content', id)))
$$;
CREATE FUNCTION pg_temp.append(thread text, id text, parent text, expected text) RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
    r json;
BEGIN
    EXECUTE pg_temp.q_append(thread, id, parent, expected) INTO r;
    RETURN r->>'headId';
END
$$;

-- Streams: append `b` (text/plain) with options `o`, as SQL text.
CREATE FUNCTION pg_temp.q_ap(p text, b text, o json DEFAULT NULL) RETURNS text LANGUAGE sql AS $$
    SELECT format('SELECT sandbox_persist.stream_append(%L, %L, convert_to(%L, %L), %L::json)',
                  p, 'text/plain', b, 'UTF8', o)
$$;
CREATE FUNCTION pg_temp.ap(p text, b text, o json DEFAULT NULL) RETURNS json LANGUAGE sql AS $$
    SELECT sandbox_persist.stream_append(p, 'text/plain', convert_to(b, 'UTF8'), o)
$$;
-- A producer's append options.
CREATE FUNCTION pg_temp.prod(epoch int, seq bigint) RETURNS json LANGUAGE sql AS $$
    SELECT json_build_object('producerId', 'eh', 'producerEpoch', epoch, 'producerSeq', seq)
$$;

-- The sequence numbers of event-log read entries, in answer order.
CREATE FUNCTION pg_temp.seqs(entries json) RETURNS bigint[] LANGUAGE sql AS $$
    SELECT coalesce(array_agg((e->>'seq')::bigint ORDER BY n), '{}')
    FROM json_array_elements(entries) WITH ORDINALITY AS t(e, n)
$$;

------------------------------------------------------------------------------
-- EH1: the hints that name a function of the extension, a setting or a
-- number are exactly the ones with a case below (a new one needs its case).
------------------------------------------------------------------------------
SELECT is((SELECT array_agg(c->>'sqlstate' ORDER BY c->>'sqlstate')
             FROM json_array_elements(sandbox_persist.error_codes()) c
            WHERE c->>'hint' ~ ('\m(' || (SELECT string_agg(DISTINCT p.proname, '|')
                                            FROM pg_proc p
                                           WHERE p.pronamespace = 'sandbox_persist'::regnamespace) || ')\M')
               OR c->>'hint' ~ '[0-9]'
               OR c->>'hint' ~ '\msandbox_persist\.'),
          ARRAY['SP301', 'SP402', 'SP405', 'SP701', 'SP706', 'SP707', 'SP708', 'SP709', 'SP711', 'SP901', 'SP902'],
          'EH1 the hints naming a function, a setting or a number are those of EH5, EH7-EH9 and EH11-EH16');

------------------------------------------------------------------------------
-- EH2 (SP002): the parent set to the head the append expects.
------------------------------------------------------------------------------
SELECT pg_temp.append('eh2', 'eh2-1', NULL, NULL);
SELECT is(pg_temp.raised(pg_temp.q_append('eh2', 'eh2-2', NULL, 'eh2-1')), pg_temp.refused('SP002'),
    'EH2.1 an append whose parent is not expectedHeadId raises SP002 with the table''s hint');
SELECT ok(pg_temp.names('SP002', 'parentCheckpointId') AND pg_temp.names('SP002', 'expectedHeadId'),
    'EH2.2 the hint names the record''s field parentCheckpointId and expectedHeadId');
SELECT is(pg_temp.append('eh2', 'eh2-2', 'eh2-1', 'eh2-1'), 'eh2-2',
    'EH2.3 the same append with parentCheckpointId = expectedHeadId succeeds');

------------------------------------------------------------------------------
-- EH3 (SP003): an id no existing checkpoint has; a deleted head's id again
-- (checkpoint-store.md §4).
------------------------------------------------------------------------------
SELECT pg_temp.append('eh3', 'eh3-1', NULL, NULL);
SELECT is(pg_temp.raised(pg_temp.q_append('eh3b', 'eh3-1', NULL, NULL)), pg_temp.refused('SP003'),
    'EH3.1 an append with an id another thread''s checkpoint has raises SP003 with the table''s hint');
SELECT ok(pg_temp.names('SP003', 'no existing checkpoint') AND pg_temp.names('SP003', 'deleted head may be used again'),
    'EH3.2 the hint asks for an id no existing checkpoint has and allows a deleted head''s');
SELECT is(pg_temp.append('eh3b', 'eh3-2', NULL, NULL), 'eh3-2',
    'EH3.3 the append with an id no checkpoint has succeeds');
SELECT lives_ok(format('SELECT sandbox_persist.checkpoint_delete_head(%L::json)',
                       json_build_object('threadId', 'eh3', 'checkpointId', 'eh3-1', 'writer', pg_temp.w('eh3'))),
    'EH3.4 the head eh3-1 is deleted');
SELECT is(pg_temp.append('eh3', 'eh3-1', NULL, NULL), 'eh3-1',
    'EH3.5 an append with the deleted head''s id succeeds');

------------------------------------------------------------------------------
-- EH4 (SP016): the whole conversation (checkpoint_append) after a false claim.
------------------------------------------------------------------------------
SELECT pg_temp.append('eh4', 'eh4-1', NULL, NULL);
SELECT is(pg_temp.raised(format('SELECT sandbox_persist.checkpoint_append_delta(%L::json, %L::json, 1, %L::bytea)',
                                pg_temp.input('eh4', 'eh4-2', 'eh4-1', 'eh4-1'), '[{"role":"user","content":"b"}]',
                                sha256('not the parent''s'::bytea))),
          pg_temp.refused('SP016'),
    'EH4.1 a delta append with a false prefix claim raises SP016 with the table''s hint');
SELECT ok(pg_temp.names('SP016', 'whole conversation'), 'EH4.2 the hint says to send the whole conversation');
SELECT is((sandbox_persist.checkpoint_append(pg_temp.input('eh4', 'eh4-2', 'eh4-1', 'eh4-1'),
             '[{"role":"user","content":"eh4-1"},{"role":"user","content":"b"}]'))->>'headId', 'eh4-2',
    'EH4.3 the same checkpoint with the whole conversation (checkpoint_append) succeeds');

------------------------------------------------------------------------------
-- EH5 (SP301): a content address named by the SHA-256 of its bytes.
------------------------------------------------------------------------------
SELECT is(pg_temp.raised(format('SELECT sandbox_persist.blob_put(%L, %L::bytea)',
                                'sandbox-files/sha256/' || encode(sha256('other'::bytea), 'hex'), 'eh5 bytes'::bytea)),
          pg_temp.refused('SP301'),
    'EH5.1 a content-addressed put whose bytes do not hash to the key raises SP301 with the table''s hint');
SELECT ok(pg_temp.names('SP301', 'SHA-256 of its bytes'), 'EH5.2 the hint names the SHA-256 of the bytes');
SELECT is(sandbox_persist.blob_put('sandbox-files/sha256/' || encode(sha256('eh5 bytes'::bytea), 'hex'),
                                   'eh5 bytes'::bytea)->>'size', '9',
    'EH5.3 the put under the SHA-256 of its bytes succeeds');

------------------------------------------------------------------------------
-- EH6 (SP303): an upload resumed at the offset it has received.
------------------------------------------------------------------------------
SELECT sandbox_persist.blob_upload_begin('eh6/obj') AS eh6 \gset
SELECT is((sandbox_persist.blob_upload_append(:'eh6', 0, '\x0102030405'::bytea)->>'received')::bigint, 5::bigint,
    'EH6.1 the first piece is received: 5 bytes');
SELECT is(pg_temp.raised(format('SELECT sandbox_persist.blob_upload_append(%L, 0, %L::bytea)', :'eh6', '\x0102030405')),
          pg_temp.refused('SP303'),
    'EH6.2 an append at another offset than the 5 received raises SP303 with the table''s hint');
SELECT ok(pg_temp.names('SP303', 'the offset it has received'), 'EH6.3 the hint names the offset received');
SELECT is((sandbox_persist.blob_upload_append(:'eh6', 5, '\x06'::bytea)->>'received')::bigint, 6::bigint,
    'EH6.4 the append at offset 5 succeeds');

------------------------------------------------------------------------------
-- EH7 (SP402): a plain read from the start is after_seq 0; -1 is 22023.
------------------------------------------------------------------------------
SELECT sandbox_persist.event_log_append('eh7', '[{"a":1},{"b":2}]');
SELECT is(pg_temp.raised($$SELECT sandbox_persist.event_log_read('eh7', 3)$$), pg_temp.refused('SP402'),
    'EH7.1 a read after the tail raises SP402 with the table''s hint');
SELECT ok(pg_temp.names('SP402', 'after_seq 0'), 'EH7.2 the hint names after_seq 0 as the start');
SELECT is(pg_temp.seqs(sandbox_persist.event_log_read('eh7', 0)->'entries'), '{1,2}'::bigint[],
    'EH7.3 event_log_read(run, 0) succeeds and reads from the start');
SELECT is(split_part(pg_temp.raised($$SELECT sandbox_persist.event_log_read('eh7', -1)$$), ' ', 1), '22023',
    'EH7.4 (-1 is the adapter''s offset: event_log_read(run, -1) is 22023)');

------------------------------------------------------------------------------
-- EH8 (SP405): a verified read replayed from after_seq 0.
------------------------------------------------------------------------------
SELECT sandbox_persist.event_log_append('eh8', '[{"a":1},{"b":2}]');
SELECT is(pg_temp.raised($$SELECT sandbox_persist.event_log_read_verified('eh8', 1, 'ffffffffffffffff')$$),
          pg_temp.refused('SP405'),
    'EH8.1 a resume token the log cannot vouch for raises SP405 with the table''s hint');
SELECT ok(pg_temp.names('SP405', 'after_seq 0'), 'EH8.2 the hint names after_seq 0 as the start');
SELECT is(pg_temp.seqs(sandbox_persist.event_log_read_verified('eh8', 0, NULL)->'entries'), '{1,2}'::bigint[],
    'EH8.3 event_log_read_verified(run, 0, NULL) succeeds and replays from the start');
SELECT is(split_part(pg_temp.raised($$SELECT sandbox_persist.event_log_read_verified('eh8', -1, NULL)$$), ' ', 1), '22023',
    'EH8.4 (event_log_read_verified(run, -1, NULL) is 22023)');

------------------------------------------------------------------------------
-- EH9 (SP701): stream_create first.
------------------------------------------------------------------------------
SELECT is(pg_temp.raised(pg_temp.q_ap('eh9', 'x')), pg_temp.refused('SP701'),
    'EH9.1 an append to a stream never created raises SP701 with the table''s hint');
SELECT ok(pg_temp.names('SP701', 'stream_create'), 'EH9.2 the hint names stream_create');
SELECT is(sandbox_persist.stream_create('eh9', 'text/plain')->>'created', 'true', 'EH9.3 stream_create succeeds');
SELECT is(pg_temp.ap('eh9', 'x')->>'outcome', 'appended', 'EH9.4 then the same append succeeds');

------------------------------------------------------------------------------
-- EH10 (SP705): a Stream-Seq that sorts byte-wise after the last one accepted.
------------------------------------------------------------------------------
SELECT sandbox_persist.stream_create('eh10', 'text/plain');
SELECT pg_temp.ap('eh10', 'x', '{"streamSeq":"b"}');
SELECT is(pg_temp.raised(pg_temp.q_ap('eh10', 'y', '{"streamSeq":"B"}')), pg_temp.refused('SP705'),
    'EH10.1 a Stream-Seq that sorts byte-wise before the last one raises SP705 with the table''s hint');
SELECT ok(pg_temp.names('SP705', 'sorts (byte-wise) after the last one accepted'),
    'EH10.2 the hint names a Stream-Seq that sorts byte-wise after the last one');
SELECT is(pg_temp.ap('eh10', 'y', '{"streamSeq":"ba"}')->>'outcome', 'appended',
    'EH10.3 the append with a Stream-Seq after it (ba after b) succeeds');

------------------------------------------------------------------------------
-- EH11 (SP706): a higher epoch from seq 0.
------------------------------------------------------------------------------
SELECT sandbox_persist.stream_create('eh11', 'text/plain');
SELECT pg_temp.ap('eh11', 'a', pg_temp.prod(1, 0));
SELECT is(pg_temp.raised(pg_temp.q_ap('eh11', 'b', pg_temp.prod(0, 1))), pg_temp.refused('SP706'),
    'EH11.1 an append with an older producer epoch raises SP706 with the table''s hint');
SELECT ok(pg_temp.names('SP706', 'higher epoch from seq 0'), 'EH11.2 the hint names a higher epoch from seq 0');
SELECT is(pg_temp.ap('eh11', 'b', pg_temp.prod(2, 0))->>'outcome', 'appended',
    'EH11.3 the append at a higher epoch (2) from seq 0 succeeds');

------------------------------------------------------------------------------
-- EH12 (SP707): resend from what stream_head says (lastSeq + 1).
------------------------------------------------------------------------------
SELECT sandbox_persist.stream_create('eh12', 'text/plain');
SELECT pg_temp.ap('eh12', 'a', pg_temp.prod(0, 0));
SELECT pg_temp.ap('eh12', 'b', pg_temp.prod(0, 1));
SELECT is(pg_temp.raised(pg_temp.q_ap('eh12', 'd', pg_temp.prod(0, 3))), pg_temp.refused('SP707'),
    'EH12.1 an append that skips a producer sequence number raises SP707 with the table''s hint');
SELECT ok(pg_temp.names('SP707', 'stream_head gives lastSeq'), 'EH12.2 the hint names stream_head''s lastSeq');
SELECT is((sandbox_persist.stream_head('eh12', 'eh')->'producer'->>'lastSeq')::bigint, 1::bigint,
    'EH12.3 stream_head(path, producer) gives lastSeq 1');
SELECT is(pg_temp.ap('eh12', 'c', pg_temp.prod(0,
             (sandbox_persist.stream_head('eh12', 'eh')->'producer'->>'lastSeq')::bigint + 1))->>'outcome', 'appended',
    'EH12.4 the append at lastSeq + 1 succeeds');

------------------------------------------------------------------------------
-- EH13 (SP708): a stream read again from -1.
------------------------------------------------------------------------------
SELECT sandbox_persist.stream_create('eh13', 'text/plain');
SELECT pg_temp.ap('eh13', 'a');
SELECT is(pg_temp.raised($$SELECT * FROM sandbox_persist.stream_read('eh13', '0000000000000000_0000000000000009')$$),
          pg_temp.refused('SP708'),
    'EH13.1 a read from an offset the stream did not issue raises SP708 with the table''s hint');
SELECT ok(pg_temp.names('SP708', 'from the start (-1)'), 'EH13.2 the hint names -1 as the start');
SELECT is((SELECT convert_from(body, 'UTF8') FROM sandbox_persist.stream_read('eh13', '-1')), 'a',
    'EH13.3 stream_read(path, ''-1'') succeeds and reads from the start');

------------------------------------------------------------------------------
-- EH14 (SP709): stream_subscription_put first.
------------------------------------------------------------------------------
SELECT is(pg_temp.raised($$SELECT sandbox_persist.stream_subscription_get('eh14')$$), pg_temp.refused('SP709'),
    'EH14.1 a get of a subscription never put raises SP709 with the table''s hint');
SELECT ok(pg_temp.names('SP709', 'stream_subscription_put'), 'EH14.2 the hint names stream_subscription_put');
SELECT lives_ok($$SELECT sandbox_persist.stream_subscription_put('eh14',
                      '{"type":"webhook","pattern":"eh14/*","webhook":{"url":"https://example.com/hook"}}')$$,
    'EH14.3 stream_subscription_put succeeds');
SELECT is(sandbox_persist.stream_subscription_get('eh14')->>'subscription_id', 'eh14',
    'EH14.4 then the same get succeeds');

------------------------------------------------------------------------------
-- EH15 (SP711): https to a public host; http only to localhost or 127.x.x.x.
------------------------------------------------------------------------------
CREATE FUNCTION pg_temp.q_hook(url text) RETURNS text LANGUAGE sql AS $$
    SELECT format('SELECT sandbox_persist.stream_subscription_put(%L, %L::json)', 'eh15',
                  json_build_object('type', 'webhook', 'pattern', 'eh15/*', 'webhook', json_build_object('url', url)))
$$;
SELECT is(pg_temp.raised(pg_temp.q_hook('http://example.com/hook')), pg_temp.refused('SP711'),
    'EH15.1 an http webhook URL of a public host raises SP711 with the table''s hint');
SELECT ok(pg_temp.names('SP711', 'https URL of a public host') AND pg_temp.names('SP711', 'localhost or 127.x.x.x'),
    'EH15.2 the hint names https to a public host, and http to localhost or 127.x.x.x');
SELECT is(pg_temp.raised(pg_temp.q_hook('https://example.com/hook')), 'no error',
    'EH15.3 the https URL of the public host is accepted');
SELECT is(pg_temp.raised(pg_temp.q_hook('http://127.0.0.9:8787/hook')), 'no error',
    'EH15.4 an http URL of 127.0.0.9 is accepted');
SELECT is(pg_temp.raised(pg_temp.q_hook('http://localhost:8787/hook')), 'no error',
    'EH15.5 an http URL of localhost is accepted');

------------------------------------------------------------------------------
-- EH16 (SP901, SP902): now_ms omitted; the settings the hints name turned on.
------------------------------------------------------------------------------
SET LOCAL sandbox_persist.allow_client_clock = off;
SELECT is(pg_temp.raised($$SELECT sandbox_persist.stream_head('eh9', NULL, 1000)$$), pg_temp.refused('SP901'),
    'EH16.1 a now_ms while client clocks are off raises SP901 with the table''s hint');
SELECT ok(pg_temp.names('SP901', 'Omit now_ms') AND pg_temp.names('SP901', 'sandbox_persist.allow_client_clock'),
    'EH16.2 the hint names omitting now_ms and sandbox_persist.allow_client_clock');
SELECT is(pg_temp.raised($$SELECT sandbox_persist.stream_head('eh9')$$), 'no error',
    'EH16.3 the same call without now_ms succeeds');
SET LOCAL sandbox_persist.allow_client_clock = on;
SELECT is(pg_temp.raised($$SELECT sandbox_persist.stream_head('eh9', NULL, 1000)$$), 'no error',
    'EH16.4 with sandbox_persist.allow_client_clock on (a superuser), the call with now_ms succeeds');
SET LOCAL sandbox_persist.allow_test_reset = off;
SELECT is(pg_temp.raised($$SELECT sandbox_persist._reset_for_tests()$$), pg_temp.refused('SP902'),
    'EH16.5 _reset_for_tests() while test resets are off raises SP902 with the table''s hint');
SELECT ok(pg_temp.names('SP902', 'sandbox_persist.allow_test_reset'),
    'EH16.6 the hint names sandbox_persist.allow_test_reset');
SET LOCAL sandbox_persist.allow_test_reset = on;
SELECT is(pg_temp.raised($$SELECT sandbox_persist._reset_for_tests()$$), 'no error',
    'EH16.7 with sandbox_persist.allow_test_reset on (a superuser), _reset_for_tests() succeeds');

SELECT * FROM finish();
ROLLBACK;
