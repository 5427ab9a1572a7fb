-- pgTAP: durable streams, the Durable Streams protocol stored in PostgreSQL
-- (docs/contract/streams.md). Cases DS1-DS23 and DS45 (listed in streams.md §8).
-- Every refused call is checked for its SQLSTATE and for leaving every
-- stream table as it was.
-- Run with: pg_prove -d <db> test/pgtap/streams.sql (needs allow_test_reset
-- and allow_client_clock on).
BEGIN;
SELECT plan(205);
SELECT sandbox_persist._reset_for_tests();
SET LOCAL sandbox_persist.allow_client_clock = on;
SET LOCAL sandbox_persist.test_timeline = 1;

------------------------------------------------------------------------------
-- Helpers (temporary, gone at ROLLBACK).
------------------------------------------------------------------------------

-- Every row of the three stream tables: equal values mean nothing changed.
CREATE FUNCTION pg_temp.state() RETURNS text LANGUAGE sql AS $$
    SELECT concat_ws(E'\n',
        'streams:' || (SELECT count(*) FROM sandbox_persist.streams),
        (SELECT string_agg(s::text, E'\n' ORDER BY s.stream_id) FROM sandbox_persist.streams s),
        'entries:' || (SELECT count(*) FROM sandbox_persist.stream_entries),
        (SELECT string_agg(e::text, E'\n' ORDER BY e.stream_id, e.seq) FROM sandbox_persist.stream_entries e),
        'producers:' || (SELECT count(*) FROM sandbox_persist.stream_producers),
        (SELECT string_agg(p::text, E'\n' ORDER BY p.stream_id, p.producer_id) FROM sandbox_persist.stream_producers p))
$$;

\ir lib/durable_helpers.psql

-- Shorthands: create, append, read (body as text), head, delete, at clock t.
CREATE FUNCTION pg_temp.mk(p text, ct text DEFAULT 'text/plain', o json DEFAULT NULL, b text DEFAULT NULL,
                           t bigint DEFAULT 1000) RETURNS json LANGUAGE sql AS $$
    SELECT sandbox_persist.stream_create(p, ct, o, convert_to(b, 'UTF8'), t)
$$;
CREATE FUNCTION pg_temp.ap(p text, b text, o json DEFAULT NULL, ct text DEFAULT 'text/plain',
                           t bigint DEFAULT 1000) RETURNS json LANGUAGE sql AS $$
    SELECT sandbox_persist.stream_append(p, ct, convert_to(b, 'UTF8'), o, t)
$$;
CREATE FUNCTION pg_temp.rd(p text, off text DEFAULT '-1', mb integer DEFAULT 1048576, t bigint DEFAULT 1000)
RETURNS TABLE (meta json, body text) LANGUAGE sql AS $$
    SELECT r.meta, convert_from(r.body, 'UTF8') FROM sandbox_persist.stream_read(p, off, mb, t) r
$$;
CREATE FUNCTION pg_temp.off(e bigint, s bigint) RETURNS text LANGUAGE sql AS $$
    SELECT lpad(e::text, 16, '0') || '_' || lpad(s::text, 16, '0')
$$;
CREATE FUNCTION pg_temp.sid(p text) RETURNS bigint LANGUAGE sql AS $$
    SELECT stream_id FROM sandbox_persist.streams WHERE path = p
$$;

------------------------------------------------------------------------------
-- DS1: create, idempotent create, conflicts.
------------------------------------------------------------------------------
SELECT is(pg_temp.mk('a')::jsonb - 'streamId',
          '{"created":true,"contentType":"text/plain","nextOffset":"0000000000000000_0000000000000000","closed":false}'::jsonb,
          'DS1: a new stream starts at the zero offset');
SELECT is((pg_temp.mk('a')->>'created')::boolean, false, 'DS1: the same create again answers created: false');
SELECT is((pg_temp.mk('a', 'TEXT/PLAIN')->>'created')::boolean, false, 'DS1: content types compare case-insensitively');
SELECT pg_temp.rejects($$SELECT pg_temp.mk('a', 'application/octet-stream')$$, 'SP703 STREAM_CONFLICT',
                       'DS1: another content type');
SELECT pg_temp.rejects($$SELECT pg_temp.mk('a', 'text/plain', '{"ttlSeconds": 5}')$$, 'SP703 STREAM_CONFLICT',
                       'DS1: another TTL');
SELECT pg_temp.rejects($$SELECT pg_temp.mk('a', 'text/plain', '{"closed": true}')$$, 'SP703 STREAM_CONFLICT',
                       'DS1: another closed status');
SELECT pg_temp.rejects($$SELECT pg_temp.mk('b', 'text/plain', '{"ttlSeconds": 5, "expiresAt": 99999}')$$, '22023',
                       'DS1: both TTL and expiry');
SELECT pg_temp.rejects($$SELECT pg_temp.mk('b', 'text/plain', '{"ttlSeconds": -1}')$$, '22023',
                       'DS1: a negative TTL');
SELECT pg_temp.rejects($$SELECT pg_temp.mk('b', 'text/plain', '{"nope": 1}')$$, '22023',
                       'DS1: an unknown option');
SELECT pg_temp.rejects($$SELECT pg_temp.mk('', 'text/plain')$$, '22023', 'DS1: an empty path');
SELECT pg_temp.rejects($$SELECT sandbox_persist.stream_create('b', 'text/plain', NULL, NULL, 5)$$,
                       'no error', 'DS1 (control): a create with a clock') ;

------------------------------------------------------------------------------
-- DS2: JSON mode flattens one level and keeps each element's exact text.
------------------------------------------------------------------------------
SELECT is((pg_temp.mk('j', 'application/json; charset=utf-8', NULL, '[{"a" : 1},  [2, 3], "x\u0000"]')->>'nextOffset'),
          pg_temp.off(0, 1), 'DS2: a JSON body is one entry');
SELECT is((SELECT message_count FROM sandbox_persist.stream_entries WHERE stream_id = pg_temp.sid('j')), 3,
          'DS2: the entry holds the array''s three messages');
SELECT is((SELECT body FROM pg_temp.rd('j')), '[{"a" : 1},[2, 3],"x\u0000"]',
          'DS2: a read returns the messages as an array, each element''s exact text');
SELECT pg_temp.ap('j', '{"b":2}', NULL, 'application/json');
SELECT is((SELECT body FROM pg_temp.rd('j')), '[{"a" : 1},[2, 3],"x\u0000",{"b":2}]',
          'DS2: a non-array body is one message');
SELECT pg_temp.rejects($$SELECT pg_temp.ap('j', '{"b":', NULL, 'application/json')$$, '22P02',
                       'DS2: a body that is not JSON');
SELECT pg_temp.rejects($$SELECT sandbox_persist.stream_append('j', 'application/json', '\xff'::bytea, NULL, 1000)$$,
                       '22P02', 'DS2: a body that is not UTF-8');
SELECT pg_temp.rejects($$SELECT pg_temp.mk('j2', 'application/json', NULL, 'nope')$$, '22P02',
                       'DS2: a create body that is not JSON');

------------------------------------------------------------------------------
-- DS3: [] creates an empty stream; [] on append is refused.
------------------------------------------------------------------------------
SELECT is(pg_temp.mk('j3', 'application/json', NULL, '[]')->>'nextOffset', pg_temp.off(0, 0),
          'DS3: [] creates an empty stream');
SELECT is((SELECT count(*)::int FROM sandbox_persist.stream_entries WHERE stream_id = pg_temp.sid('j3')), 0,
          'DS3: no entry for []');
SELECT pg_temp.rejects($$SELECT pg_temp.ap('j3', '[]', NULL, 'application/json')$$, '22023', 'DS3: [] on append');
SELECT pg_temp.rejects($$SELECT pg_temp.ap('a', '')$$, '22023', 'DS3: an empty body without close');

------------------------------------------------------------------------------
-- DS4: append check order: closed, content type, producer, Stream-Seq.
------------------------------------------------------------------------------
SELECT pg_temp.mk('o');
SELECT pg_temp.ap('o', 'x', '{"producerId":"p","producerEpoch":1,"producerSeq":0,"streamSeq":"b"}');
SELECT pg_temp.rejects($$SELECT pg_temp.ap('o', 'y', '{"producerId":"p","producerEpoch":0,"producerSeq":1,"streamSeq":"a"}', 'image/png')$$,
                       'SP703 STREAM_CONFLICT', 'DS4: content type before producer and Stream-Seq');
SELECT pg_temp.rejects($$SELECT pg_temp.ap('o', 'y', '{"producerId":"p","producerEpoch":0,"producerSeq":1,"streamSeq":"a"}')$$,
                       'SP706 STREAM_PRODUCER_EPOCH_STALE', 'DS4: producer before Stream-Seq');
SELECT pg_temp.rejects($$SELECT pg_temp.ap('o', 'y', '{"streamSeq":"a"}')$$, 'SP705 STREAM_SEQ_CONFLICT',
                       'DS4: Stream-Seq');
SELECT pg_temp.ap('o', '', '{"close":true}');
SELECT pg_temp.rejects($$SELECT pg_temp.ap('o', 'y', '{"producerId":"p","producerEpoch":0,"producerSeq":1,"streamSeq":"a"}', 'image/png')$$,
                       'SP704 STREAM_CLOSED', 'DS4: closed before everything else');
SELECT pg_temp.rejects($$SELECT pg_temp.ap('nowhere', 'y')$$, 'SP701 STREAM_NOT_FOUND', 'DS4: an unknown stream');
SELECT is(pg_temp.ap('o', '', '{"close":true}', NULL)->>'outcome', 'closed',
          'DS4: an empty body is not checked for content type (close-only)');

------------------------------------------------------------------------------
-- DS5: producer epoch and sequence rules.
------------------------------------------------------------------------------
SELECT pg_temp.mk('p');
SELECT is(pg_temp.ap('p', 'a', '{"producerId":"w","producerEpoch":0,"producerSeq":0}')->>'outcome', 'appended',
          'DS5: a new producer starts at seq 0');
SELECT is(pg_temp.ap('p', 'b', '{"producerId":"w","producerEpoch":0,"producerSeq":1}')->>'outcome', 'appended',
          'DS5: the next seq appends');
SELECT is(pg_temp.ap('p', 'b', '{"producerId":"w","producerEpoch":0,"producerSeq":1}')::jsonb - 'streamId',
          jsonb_build_object('outcome', 'duplicate', 'nextOffset', pg_temp.off(0, 2), 'closed', false,
                             'producerEpoch', 0, 'producerSeq', 1),
          'DS5: a repeated seq is a duplicate at the current tail');
SELECT pg_temp.rejects($$SELECT pg_temp.ap('p', 'd', '{"producerId":"w","producerEpoch":0,"producerSeq":3}')$$,
                       'SP707 STREAM_PRODUCER_SEQ_GAP', 'DS5: a gap');
SELECT pg_temp.rejects($$SELECT pg_temp.ap('p', 'd', '{"producerId":"w","producerEpoch":1,"producerSeq":1}')$$,
                       '22023', 'DS5: a new epoch not at seq 0');
SELECT pg_temp.rejects($$SELECT pg_temp.ap('p', 'd', '{"producerId":"w","producerEpoch":0}')$$,
                       '22023', 'DS5: producer fields not all three');
SELECT pg_temp.rejects($$SELECT pg_temp.ap('p', 'd', '{"producerId":"v","producerEpoch":0,"producerSeq":2}')$$,
                       '22023', 'DS5: an unknown producer not at seq 0');
SELECT is(pg_temp.ap('p', 'c', '{"producerId":"w","producerEpoch":1,"producerSeq":0}')->>'outcome', 'appended',
          'DS5: a new epoch at seq 0 appends');
SELECT pg_temp.rejects($$SELECT pg_temp.ap('p', 'd', '{"producerId":"w","producerEpoch":0,"producerSeq":2}')$$,
                       'SP706 STREAM_PRODUCER_EPOCH_STALE', 'DS5: the old epoch is stale');
SELECT is((sandbox_persist.stream_head('p', 'w', 1000)->'producer')::text, '{"epoch":1,"lastSeq":0}',
          'DS5: head reports the producer');
SELECT pg_temp.mk('p5');
SELECT pg_temp.ap('p5', 'a', json_build_object('producerId', 'w', 'producerEpoch', 0, 'producerSeq', n))
  FROM generate_series(0, 2) n;
SELECT is(pg_temp.ap('p5', 'b', '{"producerId":"w","producerEpoch":0,"producerSeq":1}')::jsonb
            - 'streamId' - 'nextOffset' - 'closed',
          '{"outcome":"duplicate","producerEpoch":0,"producerSeq":2}',
          'DS5: a duplicate answers the highest seq accepted (2), not its own (1)');

------------------------------------------------------------------------------
-- DS45: the stream-wide producer fence (streamFence).
------------------------------------------------------------------------------
SELECT pg_temp.mk('f', 'application/json');
SELECT is(sandbox_persist.stream_head('f', NULL, 1000)::jsonb ? 'producerFence', false,
          'DS45: a stream has no fence until an append sets one');
SELECT is(pg_temp.ap('f', '[1]', '{"producerId":"A","producerEpoch":1,"producerSeq":0,"streamFence":true}',
                     'application/json')->>'outcome', 'appended', 'DS45: a fenced append');
SELECT is((sandbox_persist.stream_head('f', NULL, 1000)->>'producerFence')::int, 1, 'DS45: head reports the fence');
SELECT is(pg_temp.ap('f', '[2]', '{"producerId":"B","producerEpoch":2,"producerSeq":0,"streamFence":true}',
                     'application/json')->>'outcome', 'appended', 'DS45: another producer at a higher epoch');
SELECT is((sandbox_persist.stream_head('f', 'A', 1000)::jsonb - 'streamId'),
          jsonb_build_object('contentType', 'application/json', 'nextOffset', pg_temp.off(0, 2), 'closed', false,
                             'producerFence', 2, 'producer', jsonb_build_object('epoch', 1, 'lastSeq', 0)),
          'DS45: the fence rose to 2; producer A is still at its own epoch 1');
SELECT pg_temp.rejects($$SELECT pg_temp.ap('f', '[3]', '{"producerId":"A","producerEpoch":1,"producerSeq":1,"streamFence":true}', 'application/json')$$,
                       'SP706 STREAM_PRODUCER_EPOCH_STALE', 'DS45: a producer below the fence, whatever its id');
SELECT pg_temp.rejects($$SELECT pg_temp.ap('f', '[3]', '{"producerId":"A","producerEpoch":1,"producerSeq":1}', 'application/json')$$,
                       'SP706 STREAM_PRODUCER_EPOCH_STALE', 'DS45: the fence is the stream''s: an append without streamFence meets it too');
SELECT pg_temp.rejects($$SELECT pg_temp.ap('f', '[3]', '{"producerId":"C","producerEpoch":0,"producerSeq":0}', 'application/json')$$,
                       'SP706 STREAM_PRODUCER_EPOCH_STALE', 'DS45: a new producer below the fence');
SELECT pg_temp.rejects($$SELECT pg_temp.ap('f', '[1]', '{"producerId":"A","producerEpoch":1,"producerSeq":0,"streamFence":true}', 'application/json')$$,
                       'SP706 STREAM_PRODUCER_EPOCH_STALE', 'DS45: below the fence even a retry of an accepted append is refused');
SELECT is(pg_temp.ap('f', '[3]', '{"producerId":"D","producerEpoch":2,"producerSeq":0,"streamFence":true}',
                     'application/json')->>'outcome', 'appended', 'DS45: a producer at the fence appends');
SELECT is(pg_temp.ap('f', '[4]', NULL, 'application/json')->>'outcome', 'appended',
          'DS45: an append without a producer is not fenced (the protocol''s plain append)');
SELECT pg_temp.rejects($$SELECT pg_temp.ap('f', '[5]', '{"streamFence":true}', 'application/json')$$,
                       '22023', 'DS45: streamFence without a producer');
SELECT pg_temp.rejects($$SELECT pg_temp.ap('f', '[5]', '{"producerId":"D","producerEpoch":2,"producerSeq":1,"streamFence":1}', 'application/json')$$,
                       '22023', 'DS45: streamFence not a boolean');
SELECT pg_temp.mk('f-fork', 'application/json', json_build_object('forkedFrom', 'f'));
SELECT is(sandbox_persist.stream_head('f-fork', NULL, 1000)::jsonb ? 'producerFence', false,
          'DS45: a fork starts without the source''s fence (as without its producers)');
SELECT is(pg_temp.ap('f-fork', '[9]', '{"producerId":"A","producerEpoch":0,"producerSeq":0}', 'application/json')->>'outcome',
          'appended', 'DS45: a producer at epoch 0 appends to the fork');

------------------------------------------------------------------------------
-- DS6: close-only requests are idempotent.
------------------------------------------------------------------------------
SELECT pg_temp.mk('c');
SELECT pg_temp.ap('c', 'x');
SELECT is(pg_temp.ap('c', '', '{"close":true}')->>'outcome', 'closed', 'DS6: close-only closes');
SELECT is(pg_temp.ap('c', '', '{"close":true}')::jsonb - 'streamId',
          jsonb_build_object('outcome', 'closed', 'nextOffset', pg_temp.off(0, 1), 'closed', true),
          'DS6: close-only again answers closed, nothing written');
SELECT pg_temp.rejects($$SELECT pg_temp.ap('c', 'y')$$, 'SP704 STREAM_CLOSED', 'DS6: an append after close');

------------------------------------------------------------------------------
-- DS7: the closing producer tuple repeated is a duplicate.
------------------------------------------------------------------------------
SELECT pg_temp.mk('ct');
SELECT is(pg_temp.ap('ct', 'last', '{"close":true,"producerId":"w","producerEpoch":2,"producerSeq":0}')->>'outcome',
          'appended', 'DS7: an append that closes');
SELECT is(pg_temp.ap('ct', 'last', '{"close":true,"producerId":"w","producerEpoch":2,"producerSeq":0}')->>'outcome',
          'duplicate', 'DS7: its retry is a duplicate');
SELECT pg_temp.rejects($$SELECT pg_temp.ap('ct', 'more', '{"producerId":"w","producerEpoch":2,"producerSeq":1}')$$,
                       'SP704 STREAM_CLOSED', 'DS7: the next seq is refused');

------------------------------------------------------------------------------
-- DS8: Stream-Seq is compared byte-wise.
------------------------------------------------------------------------------
SELECT pg_temp.mk('ss');
SELECT pg_temp.ap('ss', 'a', '{"streamSeq":"B"}');
SELECT is(pg_temp.ap('ss', 'b', '{"streamSeq":"a"}')->>'outcome', 'appended', 'DS8: "a" sorts after "B" byte-wise');
SELECT pg_temp.rejects($$SELECT pg_temp.ap('ss', 'c', '{"streamSeq":"a"}')$$, 'SP705 STREAM_SEQ_CONFLICT',
                       'DS8: an equal Stream-Seq');
SELECT pg_temp.rejects($$SELECT pg_temp.ap('ss', 'c', '{"streamSeq":"Z"}')$$, 'SP705 STREAM_SEQ_CONFLICT',
                       'DS8: a lower Stream-Seq');
SELECT is(pg_temp.ap('ss', 'c', '{"streamSeq":"aa"}')->>'outcome', 'appended', 'DS8: a longer one sorts after');

------------------------------------------------------------------------------
-- DS9: reads from -1, now, an offset, the tail.
------------------------------------------------------------------------------
SELECT pg_temp.mk('r');
SELECT pg_temp.ap('r', 'one');
SELECT pg_temp.ap('r', 'two');
SELECT pg_temp.ap('r', 'three');
SELECT is((SELECT body FROM pg_temp.rd('r')), 'onetwothree', 'DS9: -1 reads everything');
SELECT is((SELECT meta::jsonb - 'streamId' FROM pg_temp.rd('r')),
          jsonb_build_object('contentType', 'text/plain', 'startOffset', pg_temp.off(0, 0),
                             'nextOffset', pg_temp.off(0, 3), 'upToDate', true, 'closed', false),
          'DS9: its meta');
SELECT is((SELECT body FROM pg_temp.rd('r', pg_temp.off(0, 1))), 'twothree', 'DS9: from an offset');
SELECT is((SELECT ARRAY[body, meta->>'nextOffset', meta->>'upToDate'] FROM pg_temp.rd('r', 'now')),
          ARRAY['', pg_temp.off(0, 3), 'true'], 'DS9: now returns no entries and the tail');
SELECT is((SELECT ARRAY[body, meta->>'nextOffset'] FROM pg_temp.rd('r', pg_temp.off(0, 3))),
          ARRAY['', pg_temp.off(0, 3)], 'DS9: at the tail: nothing');

------------------------------------------------------------------------------
-- DS10: max_bytes pages by whole entries, at least one.
------------------------------------------------------------------------------
SELECT is((SELECT ARRAY[body, meta->>'nextOffset', meta->>'upToDate'] FROM pg_temp.rd('r', '-1', 6)),
          ARRAY['onetwo', pg_temp.off(0, 2), 'false'], 'DS10: whole entries up to max_bytes');
SELECT is((SELECT body FROM pg_temp.rd('r', '-1', 1)), 'one', 'DS10: at least one entry');
SELECT pg_temp.rejects($$SELECT * FROM pg_temp.rd('r', '-1', 0)$$, '22023', 'DS10: max_bytes 0');

------------------------------------------------------------------------------
-- DS11: closed only when the read reaches the tail of a closed stream.
------------------------------------------------------------------------------
SELECT pg_temp.ap('r', '', '{"close":true}');
SELECT is((SELECT meta->>'closed' FROM pg_temp.rd('r', '-1', 3)), 'false', 'DS11: not at the tail: not closed');
SELECT is((SELECT meta->>'closed' FROM pg_temp.rd('r')), 'true', 'DS11: at the tail: closed');

------------------------------------------------------------------------------
-- DS12: offsets increase strictly, across a new timeline too; the zero offset.
------------------------------------------------------------------------------
SELECT pg_temp.mk('e');
SELECT is(pg_temp.ap('e', 'a')->>'nextOffset', pg_temp.off(0, 1), 'DS12: timeline 1 is epoch 0');
SET LOCAL sandbox_persist.test_timeline = 3;
SELECT is(pg_temp.ap('e', 'b')->>'nextOffset', pg_temp.off(2, 2), 'DS12: timeline 3 is epoch 2');
SET LOCAL sandbox_persist.test_timeline = 2;
SELECT is(pg_temp.ap('e', 'c')->>'nextOffset', pg_temp.off(2, 3), 'DS12: the epoch never goes back');
SELECT ok(pg_temp.off(0, 1) < pg_temp.off(2, 2) AND pg_temp.off(2, 2) < pg_temp.off(2, 3),
          'DS12: the offsets sort in order');
SELECT is((SELECT body FROM pg_temp.rd('e', pg_temp.off(0, 0))), 'abc', 'DS12: the zero offset reads from the start');

------------------------------------------------------------------------------
-- DS13: an offset with a wrong epoch or past the tail is SP708.
------------------------------------------------------------------------------
SELECT pg_temp.rejects($$SELECT * FROM pg_temp.rd('e', pg_temp.off(0, 2))$$, 'SP708 STREAM_OFFSET_GONE',
                       'DS13: entry 2 was written in epoch 2, not 0');
SELECT pg_temp.rejects($$SELECT * FROM pg_temp.rd('e', pg_temp.off(1, 3))$$, 'SP708 STREAM_OFFSET_GONE',
                       'DS13: the tail with another epoch');
SELECT pg_temp.rejects($$SELECT * FROM pg_temp.rd('e', pg_temp.off(2, 4))$$, 'SP708 STREAM_OFFSET_GONE',
                       'DS13: past the tail');
SELECT pg_temp.rejects($$SELECT * FROM pg_temp.rd('e', pg_temp.off(1, 0))$$, 'SP708 STREAM_OFFSET_GONE',
                       'DS13: seq 0 with an epoch');

------------------------------------------------------------------------------
-- DS14: malformed offsets are 22023.
------------------------------------------------------------------------------
SELECT pg_temp.rejects($$SELECT * FROM pg_temp.rd('e', '0_1')$$, '22023', 'DS14: short halves');
SELECT pg_temp.rejects($$SELECT * FROM pg_temp.rd('e', '000000000000000a_0000000000000001')$$, '22023',
                       'DS14: a letter');
SELECT pg_temp.rejects($$SELECT * FROM pg_temp.rd('e', '-2')$$, '22023', 'DS14: -2');
SELECT pg_temp.rejects($$SELECT * FROM pg_temp.rd('e', 'NOW')$$, '22023', 'DS14: NOW');

------------------------------------------------------------------------------
-- DS15: a fork inherits the source's entries and shares them.
------------------------------------------------------------------------------
SET LOCAL sandbox_persist.test_timeline = 1;
SELECT pg_temp.mk('src', 'text/plain', '{"ttlSeconds": 3600}');
SELECT pg_temp.ap('src', 'aa');
SELECT pg_temp.ap('src', 'bb');
SELECT is(pg_temp.mk('f1', NULL, '{"forkedFrom":"src"}')::jsonb - 'streamId',
          jsonb_build_object('created', true, 'contentType', 'text/plain', 'nextOffset', pg_temp.off(0, 2),
                             'closed', false, 'ttlSeconds', 3600),
          'DS15: a fork at the tail, inheriting content type and TTL');
SELECT pg_temp.ap('src', 'cc');
SELECT pg_temp.ap('f1', 'xx');
SELECT is((SELECT body FROM pg_temp.rd('f1')), 'aabbxx', 'DS15: the fork reads the source up to the fork point');
SELECT is((SELECT body FROM pg_temp.rd('src')), 'aabbcc', 'DS15: the source is unchanged');
SELECT is((pg_temp.mk('f1', NULL, '{"forkedFrom":"src"}')->>'created')::boolean, false,
          'DS15: the same fork create again');
SELECT is((SELECT fork_count FROM sandbox_persist.streams WHERE path = 'src'), 1::bigint, 'DS15: fork_count');

------------------------------------------------------------------------------
-- DS16: fork at an offset with a sub-offset, bytes and JSON.
------------------------------------------------------------------------------
SELECT pg_temp.mk('f2', NULL, json_build_object('forkedFrom', 'src', 'forkOffset', pg_temp.off(0, 1),
                                                'forkSubOffset', 1));
SELECT is((SELECT body FROM pg_temp.rd('f2')), 'aab', 'DS16: bytes: the first j bytes of the next entry');
SELECT pg_temp.mk('js', 'application/json', NULL, '[1,2,3]');
SELECT pg_temp.ap('js', '[4]', NULL, 'application/json');
SELECT pg_temp.mk('jf', 'application/json', json_build_object('forkedFrom', 'js', 'forkOffset', '-1',
                                                              'forkSubOffset', 2));
SELECT is((SELECT body FROM pg_temp.rd('jf')), '[1,2]', 'DS16: JSON: the first j messages');
SELECT pg_temp.ap('jf', '[9]', NULL, 'application/json');
SELECT is((SELECT body FROM pg_temp.rd('jf')), '[1,2,9]', 'DS16: the fork appends after them');
SELECT is(pg_temp.mk('z1', NULL, json_build_object('forkedFrom', 'src', 'forkOffset', pg_temp.off(0, 1)))->>'created',
          'true', 'DS16: a fork without a sub-offset');
SELECT is(pg_temp.mk('z1', NULL, json_build_object('forkedFrom', 'src', 'forkOffset', pg_temp.off(0, 1),
                                                   'forkSubOffset', 0))->>'created',
          'false', 'DS16: sub-offset 0 is the same request as none');
SELECT is(pg_temp.mk('z1', NULL, json_build_object('forkedFrom', 'src', 'forkOffset', pg_temp.off(0, 1)))->>'created',
          'false', 'DS16: and none again after it');
SELECT is(pg_temp.mk('z2', NULL, json_build_object('forkedFrom', 'src', 'forkOffset', pg_temp.off(0, 1),
                                                   'forkSubOffset', 0))->>'created',
          'true', 'DS16: a fork with sub-offset 0');
SELECT is(pg_temp.mk('z2', NULL, json_build_object('forkedFrom', 'src', 'forkOffset', pg_temp.off(0, 1)))->>'created',
          'false', 'DS16: is the same as one without');

------------------------------------------------------------------------------
-- DS17: fork refusals.
------------------------------------------------------------------------------
SELECT pg_temp.rejects($$SELECT pg_temp.mk('fx', NULL, json_build_object('forkedFrom', 'src', 'forkOffset', pg_temp.off(0, 9)))$$,
                       '22023', 'DS17: a fork offset past the tail');
SELECT pg_temp.rejects($$SELECT pg_temp.mk('fx', NULL, json_build_object('forkedFrom', 'src', 'forkOffset', pg_temp.off(4, 1)))$$,
                       '22023', 'DS17: a fork offset not issued');
SELECT pg_temp.rejects($$SELECT pg_temp.mk('fx', NULL, json_build_object('forkedFrom', 'src', 'forkOffset', 'zz'))$$,
                       '22023', 'DS17: a malformed fork offset');
SELECT pg_temp.rejects($$SELECT pg_temp.mk('fx', NULL, json_build_object('forkedFrom', 'js', 'forkOffset', '-1', 'forkSubOffset', 4))$$,
                       '22023', 'DS17: a sub-offset past the next entry''s messages');
SELECT pg_temp.rejects($$SELECT pg_temp.mk('fx', NULL, json_build_object('forkedFrom', 'src', 'forkSubOffset', 1))$$,
                       '22023', 'DS17: a sub-offset at the tail');
SELECT pg_temp.rejects($$SELECT pg_temp.mk('fx', 'image/png', '{"forkedFrom":"src"}')$$, 'SP703 STREAM_CONFLICT',
                       'DS17: content type mismatch');
SELECT pg_temp.rejects($$SELECT pg_temp.mk('fx', NULL, '{"forkedFrom":"none"}')$$, 'SP701 STREAM_NOT_FOUND',
                       'DS17: no source');
SELECT pg_temp.rejects($$SELECT pg_temp.mk('fx', NULL, '{"forkOffset":"-1"}')$$, '22023',
                       'DS17: forkOffset without forkedFrom');

------------------------------------------------------------------------------
-- DS18: a chain of three forks; a fork copies no entries.
------------------------------------------------------------------------------
SELECT pg_temp.mk('g0');
SELECT pg_temp.ap('g0', 'A');
SELECT pg_temp.ap('g0', 'B');
SELECT pg_temp.mk('g1', NULL, '{"forkedFrom":"g0"}');
SELECT pg_temp.ap('g1', 'C');
SELECT pg_temp.mk('g2', NULL, '{"forkedFrom":"g1"}');
SELECT pg_temp.ap('g2', 'D');
SELECT pg_temp.mk('g3', NULL, json_build_object('forkedFrom', 'g2', 'forkOffset', pg_temp.off(0, 3)));
SELECT pg_temp.ap('g3', 'E');
SELECT is((SELECT body FROM pg_temp.rd('g3')), 'ABCE', 'DS18: g3 reads through g2, g1 and g0');
SELECT is((SELECT body FROM pg_temp.rd('g3', pg_temp.off(0, 1), 2)), 'BC', 'DS18: a page across two sources');
SELECT is((SELECT count(*)::int FROM sandbox_persist.stream_entries e JOIN sandbox_persist.streams s USING (stream_id)
            WHERE s.path LIKE 'g_'), 5, 'DS18: five entries stored for four streams (no copies)');
SELECT lives_ok($$SELECT pg_temp.mk('g4', NULL, '{"forkedFrom":"g3"}')$$, 'DS18: forking costs no copy either');
SELECT is((SELECT count(*)::int FROM sandbox_persist.stream_entries e JOIN sandbox_persist.streams s USING (stream_id)
            WHERE s.path LIKE 'g_'), 5, 'DS18: still five entries');

------------------------------------------------------------------------------
-- DS19: delete, soft delete, 410, path blocked, cascade.
------------------------------------------------------------------------------
SELECT is(sandbox_persist.stream_delete('g1', 1000)::text, '{"softDeleted":true}', 'DS19: a source with forks is soft-deleted');
SELECT pg_temp.rejects($$SELECT * FROM pg_temp.rd('g1')$$, 'SP702 STREAM_GONE', 'DS19: reading it is 410');
SELECT pg_temp.rejects($$SELECT pg_temp.ap('g1', 'x')$$, 'SP702 STREAM_GONE', 'DS19: appending is 410');
SELECT pg_temp.rejects($$SELECT pg_temp.mk('g1')$$, 'SP703 STREAM_CONFLICT', 'DS19: its path is blocked');
SELECT pg_temp.rejects($$SELECT pg_temp.mk('gx', NULL, '{"forkedFrom":"g1"}')$$, 'SP703 STREAM_CONFLICT',
                       'DS19: a soft-deleted source cannot be forked');
SELECT is((SELECT body FROM pg_temp.rd('g3')), 'ABCE', 'DS19: forks still read through it');
SELECT is(sandbox_persist.stream_delete('g4', 1000)::text, '{"softDeleted":false}', 'DS19: a leaf is detached');
SELECT is(sandbox_persist.stream_delete('g3', 1000)::text, '{"softDeleted":false}', 'DS19: g3 detached');
SELECT is(sandbox_persist.stream_delete('g2', 1000)::text, '{"softDeleted":false}', 'DS19: g2 detached');
SELECT is((SELECT count(*)::int FROM sandbox_persist.streams WHERE path = 'g1'), 0,
          'DS19: the cascade detached the soft-deleted g1');
SELECT is((SELECT fork_count FROM sandbox_persist.streams WHERE path = 'g0'), 0::bigint,
          'DS19: and released g0');
SELECT is((pg_temp.mk('g1')->>'created')::boolean, true, 'DS19: the path is free again');
SELECT pg_temp.rejects($$SELECT sandbox_persist.stream_delete('g2', 1000)$$, 'SP701 STREAM_NOT_FOUND',
                       'DS19: deleting twice');

------------------------------------------------------------------------------
-- DS20: TTL expiry and renewal by reads; absolute expiry.
------------------------------------------------------------------------------
SELECT pg_temp.mk('t', 'text/plain', '{"ttlSeconds": 160}', 'x', 1000);
SELECT is((SELECT body FROM pg_temp.rd('t', '-1', 1048576, 150000)), 'x', 'DS20: read before expiry');
SELECT is((SELECT touched_at FROM sandbox_persist.streams WHERE path = 't'), 150000::bigint,
          'DS20: the read renewed the TTL');
SELECT is((SELECT body FROM pg_temp.rd('t', '-1', 1048576, 155000)), 'x', 'DS20: read again within ttl/16');
SELECT is((SELECT touched_at FROM sandbox_persist.streams WHERE path = 't'), 150000::bigint,
          'DS20: not rewritten within ttl/16');
SELECT is((sandbox_persist.stream_head('t', NULL, 200000)->>'ttlSeconds')::int, 160, 'DS20: head');
SELECT is((SELECT touched_at FROM sandbox_persist.streams WHERE path = 't'), 150000::bigint,
          'DS20: head does not renew');
SELECT pg_temp.rejects($$SELECT sandbox_persist.stream_head('t', NULL, 310000)$$, 'SP701 STREAM_NOT_FOUND',
                       'DS20: expired at touched_at + ttl');
SELECT pg_temp.mk('ab', 'text/plain', '{"expiresAt": 5000}');
SELECT is((sandbox_persist.stream_head('ab', NULL, 4999)->>'expiresAt')::bigint, 5000::bigint, 'DS20: absolute expiry');
SELECT pg_temp.rejects($$SELECT pg_temp.ap('ab', 'x', NULL, 'text/plain', 5000)$$, 'SP701 STREAM_NOT_FOUND',
                       'DS20: expired at expiresAt');
SELECT is((pg_temp.mk('ab', 'text/plain', NULL, NULL, 6000)->>'created')::boolean, true,
          'DS20: an expired path can be created again');

------------------------------------------------------------------------------
-- DS21: maintain() A13 purges expired and detached streams.
------------------------------------------------------------------------------
SELECT pg_temp.mk('m1', 'text/plain', '{"expiresAt": 10000}', 'data');
SELECT pg_temp.mk('m2', 'text/plain', '{"expiresAt": 10000}', 'data');
SELECT pg_temp.mk('m2f', NULL, '{"forkedFrom":"m2", "ttlSeconds": 100000}');
SELECT is((sandbox_persist.maintain(100000, 20000)->>'streamsPurged')::int > 0, true, 'DS21: streamsPurged counts');
SELECT is((SELECT count(*)::int FROM sandbox_persist.streams WHERE path IS NULL), 0,
          'DS21: no detached row is left');
SELECT is((SELECT count(*)::int FROM sandbox_persist.streams WHERE path = 'm1'), 0, 'DS21: m1 purged');
SELECT is((SELECT deleted_at IS NOT NULL FROM sandbox_persist.streams WHERE path = 'm2'), true,
          'DS21: an expired source with forks is soft-deleted');
SELECT is((SELECT body FROM pg_temp.rd('m2f', '-1', 1048576, 20000)), 'data', 'DS21: its fork still reads it');
SELECT is((SELECT count(*)::int FROM sandbox_persist.stream_entries e
            WHERE NOT EXISTS (SELECT 1 FROM sandbox_persist.streams s WHERE s.stream_id = e.stream_id)), 0,
          'DS21: no orphan entries');

------------------------------------------------------------------------------
-- DS22: head and notifications.
------------------------------------------------------------------------------
SELECT is(sandbox_persist.stream_head('r', NULL, 1000)::jsonb - 'streamId',
          jsonb_build_object('contentType', 'text/plain', 'nextOffset', pg_temp.off(0, 3), 'closed', true),
          'DS22: head of a closed stream');
SELECT pg_temp.rejects($$SELECT sandbox_persist.stream_head('nowhere', NULL, 1000)$$, 'SP701 STREAM_NOT_FOUND',
                       'DS22: head of nothing');
SELECT pg_temp.rejects($$SELECT sandbox_persist.stream_read('r', '-1', 10, 1000)$$, 'no error',
                       'DS22 (control): a read with a clock');

------------------------------------------------------------------------------
-- DS23: the HTTP statuses of the stream codes.
------------------------------------------------------------------------------
SELECT is((SELECT json_object_agg(c->>'sqlstate', (c->>'httpStatus')::int)::jsonb
             FROM json_array_elements(sandbox_persist.error_codes()) c
            WHERE c->>'sqlstate' BETWEEN 'SP701' AND 'SP708'),
          '{"SP701":404,"SP702":410,"SP703":409,"SP704":409,"SP705":409,"SP706":403,"SP707":409,"SP708":410}'::jsonb,
          'DS23: error_codes() reports httpStatus');

SELECT * FROM finish();
ROLLBACK;
