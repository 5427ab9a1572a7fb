-- pgTAP: blob store API (docs/contract/blobs.md).
-- Cases: P17-P23 (upstream blob cases), R8, R9, R11, R12, R13, R32,
-- V4, V6, V15, V16, V21, V22 (blob parts).
-- Storage, uploads and content addressing (B cases) are in blob_storage.sql.
-- Run with: pg_prove -d <db> test/pgtap/blobs.sql
-- as a superuser, with sandbox_persist.allow_test_reset on for the database
-- (allow_client_clock is turned on with SET LOCAL).
BEGIN;
SELECT plan(185);
SELECT sandbox_persist._reset_for_tests();
-- now_ms arguments (the injected clock) need this superuser setting.
SET LOCAL sandbox_persist.allow_client_clock = on;

------------------------------------------------------------------------------
-- Helpers (temporary, gone at ROLLBACK).
------------------------------------------------------------------------------

-- n pseudo-random bytes (a SHA-256 chain; pgcrypto is not needed).
\ir lib/blob_helpers.psql

------------------------------------------------------------------------------
-- P17: missing objects, put/get/head round trips.
------------------------------------------------------------------------------
SELECT is((SELECT count(*) FROM sandbox_persist.blob_get('blob/missing')), 0::bigint,
    'P17.1 get of a missing key returns no row (null)');
SELECT ok(sandbox_persist.blob_head('blob/missing') IS NULL,
    'P17.2 head of a missing key is SQL NULL');

SELECT is(pg_temp.keep('p17', sandbox_persist.blob_put('blob/a', '\x01020304',
            '{"contentType":"application/octet-stream","customMetadata":{"owner":"test","k2":"v2"}}',
            1000))::jsonb - 'etag',
    '{"key":"blob/a","size":4,"contentType":"application/octet-stream",
      "customMetadata":{"owner":"test","k2":"v2"},"createdAt":1000,"updatedAt":1000}'::jsonb,
    'P17.3 a 4-byte put with content type and metadata returns the matching record');
SELECT is(json_typeof(pg_temp.got('p17')->'etag'), 'string',
    'P17.4 the put record carries a string etag');
SELECT ok(pg_temp.got('p17')->>'etag' <> '',
    'P17.5 the etag is not empty');
SELECT is((SELECT record::jsonb FROM sandbox_persist.blob_get('blob/a')),
    pg_temp.got('p17')::jsonb,
    'P17.6 get returns the same record as the put');
SELECT is((SELECT body FROM sandbox_persist.blob_get('blob/a')), '\x01020304'::bytea,
    'P17.7 get returns the exact 4 bytes');
SELECT is(sandbox_persist.blob_head('blob/a')::jsonb, pg_temp.got('p17')::jsonb,
    'P17.8 head returns the same record without bytes');
SELECT is(sandbox_persist.blob_head('blob/a')->>'size', '4',
    'P17.9 head reports size 4');
SELECT ok(NOT (sandbox_persist.blob_head('blob/a')::jsonb ? 'range'),
    'P17.10 head has no range');

SELECT is((sandbox_persist.blob_put('blob/text', convert_to('hello wörld ✓', 'UTF8'))->>'size')::int,
    octet_length(convert_to('hello wörld ✓', 'UTF8')),
    'P17.11 a string body is stored with its UTF-8 byte count');
SELECT is((SELECT convert_from(body, 'UTF8') FROM sandbox_persist.blob_get('blob/text')),
    'hello wörld ✓',
    'P17.12 a string body reads back as the same text');

SELECT is((sandbox_persist.blob_put('blob/buffer',
            (SELECT decode(string_agg(lpad(to_hex(i), 2, '0'), '' ORDER BY i), 'hex')
               FROM generate_series(0, 255) i))->>'size'),
    '256',
    'P17.13 an ArrayBuffer body (all 256 byte values) is stored with size 256');
SELECT is((SELECT body FROM sandbox_persist.blob_get('blob/buffer')),
    (SELECT decode(string_agg(lpad(to_hex(i), 2, '0'), '' ORDER BY i), 'hex')
       FROM generate_series(0, 255) i),
    'P17.14 the ArrayBuffer body round-trips byte for byte');

------------------------------------------------------------------------------
-- P18: a 64 KiB stream without a declared length (streamed upload).
------------------------------------------------------------------------------
SELECT is(pg_temp.upload('p18', 'blob/stream', NULL, pg_temp.rnd(65536, 'p18'), 10000, 5000)::jsonb
          - 'etag',
    '{"key":"blob/stream","size":65536,"createdAt":5000,"updatedAt":5000}'::jsonb,
    'P18.1 a length-less stream sent in 7 pieces commits with size 65536');
SELECT matches(pg_temp.got('p18.id') #>> '{}',
    '^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$',
    'P18.2 blob_upload_begin returns a UUID text');
SELECT is(pg_temp.got('p18.appends')::jsonb,
    '[{"received":10000},{"received":20000},{"received":30000},{"received":40000},
      {"received":50000},{"received":60000},{"received":65536}]'::jsonb,
    'P18.3 each append reports the bytes received so far');
SELECT is((SELECT body FROM sandbox_persist.blob_get('blob/stream')), pg_temp.rnd(65536, 'p18'),
    'P18.4 the stored bytes are identical');
SELECT is((SELECT record::jsonb FROM sandbox_persist.blob_get('blob/stream')),
    pg_temp.got('p18')::jsonb,
    'P18.5 get returns the committed record');
SELECT is(sandbox_persist.blob_head('blob/stream')->>'size', '65536',
    'P18.6 head reports size 65536');

------------------------------------------------------------------------------
-- P19: a 9 KiB length-less stream with expectedLength (never the size).
------------------------------------------------------------------------------
SELECT is(pg_temp.upload('p19', 'blob/expected', '{"expectedLength":4096}',
                         pg_temp.rnd(9216, 'p19'), 4000, 6000)::jsonb - 'etag',
    '{"key":"blob/expected","size":9216,"createdAt":6000,"updatedAt":6000}'::jsonb,
    'P19.1 a streamed upload with expectedLength 4096 is stored with the counted size 9216');
SELECT is((SELECT body FROM sandbox_persist.blob_get('blob/expected')), pg_temp.rnd(9216, 'p19'),
    'P19.2 the streamed bytes are identical');
SELECT is(sandbox_persist.blob_head('blob/expected')::jsonb - 'etag',
    '{"key":"blob/expected","size":9216,"createdAt":6000,"updatedAt":6000}'::jsonb,
    'P19.3 head: counted size, expectedLength not stored anywhere in the record');
SELECT is(sandbox_persist.blob_put('blob/expected-put', pg_temp.rnd(9216, 'p19b'),
            '{"expectedLength":99999}', 7000)::jsonb - 'etag',
    '{"key":"blob/expected-put","size":9216,"createdAt":7000,"updatedAt":7000}'::jsonb,
    'P19.4 a single-call put with expectedLength 99999 is stored with the counted size 9216');
SELECT is((SELECT body FROM sandbox_persist.blob_get('blob/expected-put')),
    pg_temp.rnd(9216, 'p19b'),
    'P19.5 the put bytes are identical');

------------------------------------------------------------------------------
-- P20: ranges on a 1024-byte object.
------------------------------------------------------------------------------
DO $$BEGIN PERFORM pg_temp.keep('p20', sandbox_persist.blob_put('blob/range', pg_temp.pat(1024))); END$$;

SELECT is((SELECT body FROM sandbox_persist.blob_get('blob/range', 100, 50)),
    substring(pg_temp.pat(1024) FROM 101 FOR 50),
    'P20.1 range {100,50} serves exactly those 50 bytes');
SELECT is((SELECT record->>'size' FROM sandbox_persist.blob_get('blob/range', 100, 50)), '1024',
    'P20.2 range {100,50}: size is the whole-object size 1024');
SELECT is((SELECT record::jsonb->'range' FROM sandbox_persist.blob_get('blob/range', 100, 50)),
    '{"offset":100,"length":50}'::jsonb,
    'P20.3 range {100,50} reports range {100,50}');
SELECT is((SELECT record::jsonb - 'range' FROM sandbox_persist.blob_get('blob/range', 100, 50)),
    pg_temp.got('p20')::jsonb,
    'P20.4 apart from range, the ranged record is the stored record');
SELECT is((SELECT body FROM sandbox_persist.blob_get('blob/range', 1000)),
    substring(pg_temp.pat(1024) FROM 1001),
    'P20.5 range {offset 1000} serves the last 24 bytes');
SELECT is((SELECT record::jsonb->'range' FROM sandbox_persist.blob_get('blob/range', 1000)),
    '{"offset":1000,"length":24}'::jsonb,
    'P20.6 range {offset 1000} reports range {1000,24}');
SELECT is((SELECT body FROM sandbox_persist.blob_get('blob/range', 1000, 1000)),
    substring(pg_temp.pat(1024) FROM 1001),
    'P20.7 range {1000,1000} is clamped to the last 24 bytes');
SELECT is((SELECT record::jsonb->'range' FROM sandbox_persist.blob_get('blob/range', 1000, 1000)),
    '{"offset":1000,"length":24}'::jsonb,
    'P20.8 range {1000,1000} reports the served length 24');
SELECT is((SELECT body FROM sandbox_persist.blob_get('blob/range', 10, 5)),
    substring(pg_temp.pat(1024) FROM 11 FOR 5),
    'P20.9 range {10,5} yields those 5 bytes');
SELECT is((SELECT record::jsonb->'range' FROM sandbox_persist.blob_get('blob/range', 10, 5)),
    '{"offset":10,"length":5}'::jsonb,
    'P20.10 range {10,5} reports range {10,5}');
SELECT is((SELECT body FROM sandbox_persist.blob_get('blob/range')), pg_temp.pat(1024),
    'P20.11 a whole read returns all 1024 bytes');
SELECT ok((SELECT NOT (record::jsonb ? 'range') FROM sandbox_persist.blob_get('blob/range')),
    'P20.12 a whole read has no range');
SELECT is((SELECT record::jsonb FROM sandbox_persist.blob_get('blob/range')),
    pg_temp.got('p20')::jsonb,
    'P20.13 a whole read returns exactly the stored record');

------------------------------------------------------------------------------
-- P21: overwrite, delete, second delete.
------------------------------------------------------------------------------
DO $$BEGIN PERFORM pg_temp.keep('p21.first', sandbox_persist.blob_put('blob/over', '\x0a0b0c0d',
    '{"contentType":"application/x-first","customMetadata":{"v":"1","only":"first"}}', 1000)); END$$;
SELECT is(pg_temp.keep('p21', sandbox_persist.blob_put('blob/over', '\x070809',
            '{"contentType":"text/plain","customMetadata":{"v":"2"}}', 2000))::jsonb - 'etag',
    '{"key":"blob/over","size":3,"contentType":"text/plain","customMetadata":{"v":"2"},
      "createdAt":1000,"updatedAt":2000}'::jsonb,
    'P21.1 the overwrite returns the new size, type and metadata (createdAt kept)');
SELECT isnt(pg_temp.got('p21')->>'etag', pg_temp.got('p21.first')->>'etag',
    'P21.2 the overwrite has a different etag');
SELECT is((SELECT body FROM sandbox_persist.blob_get('blob/over')), '\x070809'::bytea,
    'P21.3 get returns the new bytes');
SELECT is((SELECT record::jsonb FROM sandbox_persist.blob_get('blob/over')),
    pg_temp.got('p21')::jsonb,
    'P21.4 get returns the new record');
SELECT is(sandbox_persist.blob_delete('blob/over'), true,
    'P21.5 delete of an existing object returns true');
SELECT is((SELECT count(*) FROM sandbox_persist.blob_get('blob/over')), 0::bigint,
    'P21.6 after delete get returns no row');
SELECT ok(sandbox_persist.blob_head('blob/over') IS NULL,
    'P21.7 after delete head is NULL');
SELECT lives_ok($$SELECT sandbox_persist.blob_delete('blob/over')$$,
    'P21.8 a second delete is silent');
SELECT is(sandbox_persist.blob_delete('blob/over'), false,
    'P21.9 a delete of an absent key returns false');

------------------------------------------------------------------------------
-- P22: literal, case-sensitive prefix.
------------------------------------------------------------------------------
DO $$BEGIN PERFORM sandbox_persist.blob_put(k, convert_to(k, 'UTF8'))
  FROM unnest(ARRAY['list_/c', 'list_/a', 'list-x/d', 'LIST_/e', 'listX/f', 'list_/b',
                    'list_', 'lista/g']) AS k; END$$;
SELECT is(pg_temp.keys(sandbox_persist.blob_list('list_/')), ARRAY['list_/a', 'list_/b', 'list_/c'],
    'P22.1 prefix list_/ lists exactly list_/a, list_/b, list_/c in order');
SELECT is(pg_temp.page_info(sandbox_persist.blob_list('list_/')), '{"truncated":false}'::jsonb,
    'P22.2 that list is not truncated and has no cursor');
SELECT is((sandbox_persist.blob_list('list_/')->'objects'->0)::jsonb,
    sandbox_persist.blob_head('list_/a')::jsonb,
    'P22.3 listed objects are the BlobRecords head returns');
SELECT is(sandbox_persist.blob_list('no-such-prefix/')::jsonb,
    '{"objects":[],"truncated":false}'::jsonb,
    'P22.4 a prefix with no match lists [] untruncated');
SELECT is(pg_temp.keys(sandbox_persist.blob_list('LIST_/')), ARRAY['LIST_/e'],
    'P22.5 prefix LIST_/ matches only the upper-case key');

------------------------------------------------------------------------------
-- P23: limit 0, paging by 2, exact fit.
------------------------------------------------------------------------------
DO $$BEGIN PERFORM sandbox_persist.blob_put(k, '\x00')
  FROM unnest(ARRAY['page/3', 'page/1', 'page/5', 'page/2', 'page/4', 'pagf/0', 'pag/9']) AS k; END$$;
SELECT is(sandbox_persist.blob_list('page/', NULL, 0)::jsonb,
    '{"objects":[],"truncated":false}'::jsonb,
    'P23.1 limit 0 gives no objects, not truncated, no cursor (though keys match)');

DO $$BEGIN PERFORM pg_temp.keep('p23.1', sandbox_persist.blob_list('page/', NULL, 2)); END$$;
SELECT is(pg_temp.keys(pg_temp.got('p23.1')), ARRAY['page/1', 'page/2'],
    'P23.2 the first page of 2 holds page/1, page/2');
SELECT is(pg_temp.page_info(pg_temp.got('p23.1')), '{"truncated":true,"cursor":"page/2"}'::jsonb,
    'P23.3 the first page is truncated and its cursor is its last key');
DO $$BEGIN PERFORM pg_temp.keep('p23.2', sandbox_persist.blob_list('page/', pg_temp.got('p23.1')->>'cursor', 2)); END$$;
SELECT is(pg_temp.keys(pg_temp.got('p23.2')), ARRAY['page/3', 'page/4'],
    'P23.4 the second page holds page/3, page/4');
SELECT is(pg_temp.page_info(pg_temp.got('p23.2')), '{"truncated":true,"cursor":"page/4"}'::jsonb,
    'P23.5 the second page is truncated with cursor page/4');
DO $$BEGIN PERFORM pg_temp.keep('p23.3', sandbox_persist.blob_list('page/', pg_temp.got('p23.2')->>'cursor', 2)); END$$;
SELECT is(pg_temp.keys(pg_temp.got('p23.3')), ARRAY['page/5'],
    'P23.6 the last page holds page/5');
SELECT is(pg_temp.page_info(pg_temp.got('p23.3')), '{"truncated":false}'::jsonb,
    'P23.7 the last page is not truncated and has no cursor');

-- Generic paging loop: every key visited once, each truncated cursor = last key.
CREATE FUNCTION pg_temp.page_all(prefix text, lim integer) RETURNS text[] LANGUAGE plpgsql AS $$
DECLARE
    cur text; page json; seen text[] := '{}'; bad text[] := '{}'; n integer := 0;
BEGIN
    LOOP
        n := n + 1;
        EXIT WHEN n > 20;
        page := sandbox_persist.blob_list(prefix, cur, lim);
        seen := seen || pg_temp.keys(page);
        EXIT WHEN NOT (page->>'truncated')::boolean;
        IF page->>'cursor' IS DISTINCT FROM page->'objects'->-1->>'key' THEN
            bad := bad || ('cursor ' || coalesce(page->>'cursor', 'absent'));
        END IF;
        cur := page->>'cursor';
    END LOOP;
    RETURN seen || bad;
END
$$;
SELECT is(pg_temp.page_all('page/', 2), ARRAY['page/1', 'page/2', 'page/3', 'page/4', 'page/5'],
    'P23.8 paging by 2 visits all five page/* keys exactly once, cursors = last keys');
SELECT is(pg_temp.keys(sandbox_persist.blob_list('page/', NULL, 5)),
    ARRAY['page/1', 'page/2', 'page/3', 'page/4', 'page/5'],
    'P23.9 limit 5 (exact fit) lists all five keys');
SELECT is(pg_temp.page_info(sandbox_persist.blob_list('page/', NULL, 5)), '{"truncated":false}'::jsonb,
    'P23.10 the exact fit is not truncated and has no cursor');
SELECT is(pg_temp.page_info(sandbox_persist.blob_list('page/', NULL, 4)),
    '{"truncated":true,"cursor":"page/4"}'::jsonb,
    'P23.11 limit 4 of five is truncated with cursor page/4');
SELECT is(pg_temp.page_info(sandbox_persist.blob_list('page/')), '{"truncated":false}'::jsonb,
    'P23.12 no limit: not truncated, no cursor');
SELECT is(pg_temp.keys(sandbox_persist.blob_list('page/')),
    ARRAY['page/1', 'page/2', 'page/3', 'page/4', 'page/5'],
    'P23.13 no limit lists all five keys');

------------------------------------------------------------------------------
-- R8, R9, R11, R12, R13: range validation.
------------------------------------------------------------------------------
DO $$BEGIN PERFORM pg_temp.keep('r8', sandbox_persist.blob_put('range/four', '\x61626364')); END$$;
SELECT pg_temp.rejects($$SELECT * FROM sandbox_persist.blob_get('range/four', 4)$$, '22003',
    'R8.1 range offset 4 on a 4-byte object',
    'Blob range offset 4 is outside the object (size 4).');
SELECT pg_temp.rejects($$SELECT * FROM sandbox_persist.blob_get('range/four', 4, 1)$$, '22003',
    'R8.2 range {4,1} on a 4-byte object',
    'Blob range offset 4 is outside the object (size 4).');
SELECT pg_temp.rejects($$SELECT * FROM sandbox_persist.blob_get('range/four', 9, 0)$$, '22003',
    'R8.3 range {9,0} past the end',
    'Blob range offset 9 is outside the object (size 4).');
SELECT is((SELECT body FROM sandbox_persist.blob_get('range/four', 3)), '\x64'::bytea,
    'R8.4 offset size-1 is still inside the object');

SELECT pg_temp.rejects($$SELECT * FROM sandbox_persist.blob_get('range/four', -1)$$, '22003',
    'R9.1 range offset -1',
    'Blob range offset -1 is outside the object (size 4).');
SELECT pg_temp.rejects($$SELECT * FROM sandbox_persist.blob_get('range/four', -1, 2)$$, '22003',
    'R9.2 range {-1,2}',
    'Blob range offset -1 is outside the object (size 4).');

DO $$BEGIN PERFORM pg_temp.keep('r11', sandbox_persist.blob_put('range/empty', ''::bytea)); END$$;
SELECT pg_temp.rejects($$SELECT * FROM sandbox_persist.blob_get('range/empty', 0)$$, '22003',
    'R11.1 range {offset 0} of a 0-byte object',
    'Blob range offset 0 is outside the object (size 0).');
SELECT pg_temp.rejects($$SELECT * FROM sandbox_persist.blob_get('range/empty', 0, 0)$$, '22003',
    'R11.2 range {0,0} of a 0-byte object',
    'Blob range offset 0 is outside the object (size 0).');
SELECT pg_temp.rejects($$SELECT * FROM sandbox_persist.blob_get('range/empty', 0, 10)$$, '22003',
    'R11.3 range {0,10} of a 0-byte object',
    'Blob range offset 0 is outside the object (size 0).');
SELECT is((SELECT body FROM sandbox_persist.blob_get('range/empty')), ''::bytea,
    'R11.4 a whole read of the 0-byte object still works and is empty');

SELECT pg_temp.rejects($$SELECT * FROM sandbox_persist.blob_get('range/four', 0, -1)$$, '22003',
    'R12.1 range length -1',
    'Blob range length -1 is not valid.');
SELECT pg_temp.rejects($$SELECT * FROM sandbox_persist.blob_get('range/four', 2, -7)$$, '22003',
    'R12.2 range length -7',
    'Blob range length -7 is not valid.');

SELECT is((SELECT body FROM sandbox_persist.blob_get('range/four', 1, 0)), ''::bytea,
    'R13.1 range length 0 serves no bytes');
SELECT is((SELECT record::jsonb->'range' FROM sandbox_persist.blob_get('range/four', 1, 0)),
    '{"offset":1,"length":0}'::jsonb,
    'R13.2 range length 0 reports range {1,0}');
SELECT is((SELECT record->>'size' FROM sandbox_persist.blob_get('range/four', 3, 0)), '4',
    'R13.3 a zero-length range still reports the whole-object size');

------------------------------------------------------------------------------
-- R32: overwrite without options, {} metadata, empty contentType.
------------------------------------------------------------------------------
DO $$BEGIN PERFORM sandbox_persist.blob_put('r32/obj', '\x01',
    '{"contentType":"text/plain","customMetadata":{"a":"b"}}', 1000); END$$;
SELECT is(sandbox_persist.blob_put('r32/obj', '\x02', NULL, 2000)::jsonb - 'etag',
    '{"key":"r32/obj","size":1,"createdAt":1000,"updatedAt":2000}'::jsonb,
    'R32.1 an overwrite without options returns neither contentType nor customMetadata');
SELECT is(sandbox_persist.blob_head('r32/obj')::jsonb - 'etag',
    '{"key":"r32/obj","size":1,"createdAt":1000,"updatedAt":2000}'::jsonb,
    'R32.2 head after that overwrite: both absent');
SELECT is(sandbox_persist.blob_put('r32/obj', '\x03', '{"contentType":"a/b","customMetadata":{"x":"y"}}',
                                   3000)::jsonb - 'etag',
    '{"key":"r32/obj","size":1,"contentType":"a/b","customMetadata":{"x":"y"},
      "createdAt":1000,"updatedAt":3000}'::jsonb,
    'R32.3 options are set again by a later put');
SELECT is(sandbox_persist.blob_put('r32/obj', '\x04', '{}', 4000)::jsonb - 'etag',
    '{"key":"r32/obj","size":1,"createdAt":1000,"updatedAt":4000}'::jsonb,
    'R32.4 an overwrite with empty options {} also leaves both absent');
SELECT is(sandbox_persist.blob_put('r32/empty-meta', '\x01', '{"customMetadata":{}}', 1000)::jsonb
          -> 'customMetadata',
    '{}'::jsonb,
    'R32.5 customMetadata {} is returned as {} by put');
SELECT is((SELECT record::jsonb -> 'customMetadata' FROM sandbox_persist.blob_get('r32/empty-meta')),
    '{}'::jsonb,
    'R32.6 customMetadata {} reads back as {} through get');
SELECT is(sandbox_persist.blob_head('r32/empty-meta')::jsonb -> 'customMetadata', '{}'::jsonb,
    'R32.7 customMetadata {} reads back as {} through head');
SELECT is(sandbox_persist.blob_list('r32/empty')::jsonb #> '{objects,0,customMetadata}', '{}'::jsonb,
    'R32.8 customMetadata {} lists as {}');
SELECT is(sandbox_persist.blob_put('r32/empty-type', '\x01', '{"contentType":""}', 1000)::jsonb - 'etag',
    '{"key":"r32/empty-type","size":1,"createdAt":1000,"updatedAt":1000}'::jsonb,
    'R32.9 an empty contentType is omitted from the put record');
SELECT ok(NOT (sandbox_persist.blob_head('r32/empty-type')::jsonb ? 'contentType'),
    'R32.10 an empty contentType is omitted from head');
SELECT ok((SELECT NOT (record::jsonb ? 'contentType') FROM sandbox_persist.blob_get('r32/empty-type')),
    'R32.11 an empty contentType is omitted from get');

------------------------------------------------------------------------------
-- V21: customMetadata must be an object of strings (put and upload).
------------------------------------------------------------------------------
SELECT pg_temp.rejects($$SELECT sandbox_persist.blob_put('r32/obj', '\x09', '{"customMetadata":{"a":1}}')$$,
    '22023', 'V21.1 customMetadata with a number value on an existing key');
SELECT pg_temp.rejects($$SELECT sandbox_persist.blob_put('v21/new', '\x09', '{"customMetadata":{"a":"x","b":true}}')$$,
    '22023', 'V21.2 customMetadata with a boolean value on a new key');
SELECT pg_temp.rejects($$SELECT sandbox_persist.blob_put('v21/new', '\x09', '{"customMetadata":{"a":null}}')$$,
    '22023', 'V21.3 customMetadata with a null value');
SELECT pg_temp.rejects($$SELECT sandbox_persist.blob_put('v21/new', '\x09', '{"customMetadata":{"a":{"b":"c"}}}')$$,
    '22023', 'V21.4 customMetadata with a nested object value');
SELECT pg_temp.rejects($$SELECT sandbox_persist.blob_put('v21/new', '\x09', '{"customMetadata":["a"]}')$$,
    '22023', 'V21.5 customMetadata that is an array');
SELECT pg_temp.rejects($$SELECT sandbox_persist.blob_put('v21/new', '\x09', '{"customMetadata":"a=b"}')$$,
    '22023', 'V21.6 customMetadata that is a string');
SELECT pg_temp.rejects($$SELECT sandbox_persist.blob_upload_begin('v21/new', '{"customMetadata":{"a":2}}')$$,
    '22023', 'V21.7 upload_begin with customMetadata holding a number');

------------------------------------------------------------------------------
-- V22: negative page_limit, range_length without range_offset.
------------------------------------------------------------------------------
SELECT pg_temp.rejects($$SELECT sandbox_persist.blob_list('page/', NULL, -1)$$, '22023',
    'V22.1 blob_list with page_limit -1');
SELECT pg_temp.rejects($$SELECT sandbox_persist.blob_list(NULL, NULL, -2147483648)$$, '22023',
    'V22.2 blob_list with the most negative page_limit');
SELECT pg_temp.rejects($$SELECT * FROM sandbox_persist.blob_get('range/four', NULL, 2)$$, '22023',
    'V22.3 blob_get with range_length but no range_offset');
SELECT pg_temp.rejects($$SELECT * FROM sandbox_persist.blob_get('blob/missing', NULL, 2)$$, '22023',
    'V22.4 range_length without range_offset is refused even for a missing key');

------------------------------------------------------------------------------
-- V6: unknown option keys are refused, naming the key.
------------------------------------------------------------------------------
SELECT pg_temp.rejects($$SELECT sandbox_persist.blob_put('r32/obj', '\x09', '{"content_type":"a/b"}')$$,
    '22023', 'V6.1 blob_put options with the unknown key content_type', NULL, 'content_type');
SELECT pg_temp.rejects($$SELECT sandbox_persist.blob_upload_begin('v6/new', '{"sizeHint":3}')$$,
    '22023', 'V6.2 blob_upload_begin options with the unknown key sizeHint', NULL, 'sizeHint');

------------------------------------------------------------------------------
-- V4: SQL NULL for a required argument -> 22004.
------------------------------------------------------------------------------
SELECT pg_temp.rejects($$SELECT sandbox_persist.blob_put(NULL, '\x01')$$, '22004',
    'V4.1 blob_put with a NULL key');
SELECT pg_temp.rejects($$SELECT sandbox_persist.blob_put('v4/new', NULL)$$, '22004',
    'V4.2 blob_put with a NULL body');
SELECT pg_temp.rejects($$SELECT sandbox_persist.blob_put('r32/obj', NULL)$$, '22004',
    'V4.3 blob_put of an existing key with a NULL body');
SELECT pg_temp.rejects($$SELECT * FROM sandbox_persist.blob_get(NULL)$$, '22004',
    'V4.4 blob_get with a NULL key');
SELECT pg_temp.rejects($$SELECT sandbox_persist.blob_head(NULL)$$, '22004',
    'V4.5 blob_head with a NULL key');
SELECT pg_temp.rejects($$SELECT sandbox_persist.blob_delete(NULL)$$, '22004',
    'V4.6 blob_delete with a NULL key');
SELECT pg_temp.rejects($$SELECT sandbox_persist.blob_upload_begin(NULL)$$, '22004',
    'V4.7 blob_upload_begin with a NULL key');
DO $$BEGIN PERFORM pg_temp.keep('v4.id', to_json(sandbox_persist.blob_upload_begin('v4/upload'))); END$$;
SELECT pg_temp.rejects($$SELECT sandbox_persist.blob_upload_append(NULL, 0, '\x01')$$, '22004',
    'V4.8 blob_upload_append with a NULL upload id');
SELECT pg_temp.rejects(format('SELECT sandbox_persist.blob_upload_append(%L, NULL, %L)',
                              pg_temp.got('v4.id') #>> '{}', '\x01'), '22004',
    'V4.9 blob_upload_append with a NULL offset');
SELECT pg_temp.rejects(format('SELECT sandbox_persist.blob_upload_append(%L, 0, NULL)',
                              pg_temp.got('v4.id') #>> '{}'), '22004',
    'V4.10 blob_upload_append with NULL bytes');
SELECT pg_temp.rejects($$SELECT sandbox_persist.blob_upload_commit(NULL)$$, '22004',
    'V4.11 blob_upload_commit with a NULL upload id');
SELECT pg_temp.rejects($$SELECT sandbox_persist.blob_upload_abort(NULL)$$, '22004',
    'V4.12 blob_upload_abort with a NULL upload id');
SELECT is(sandbox_persist.blob_upload_abort(pg_temp.got('v4.id') #>> '{}'), true,
    'V4.13 the upload used above is still open and can be aborted');

------------------------------------------------------------------------------
-- V15 / V16: key length in UTF-8 bytes (2048 allowed), empty key.
------------------------------------------------------------------------------
SELECT pg_temp.rejects(format('SELECT sandbox_persist.blob_put(%L, %L)', repeat('k', 2049), '\x01'),
    '22001', 'V15.1 blob_put with a 2049-byte key');
SELECT pg_temp.rejects(format('SELECT sandbox_persist.blob_put(%L, %L)', repeat('é', 1024) || 'x', '\x01'),
    '22001', 'V15.2 blob_put with a key of 1025 characters but 2049 UTF-8 bytes');
SELECT pg_temp.rejects(format('SELECT * FROM sandbox_persist.blob_get(%L)', repeat('k', 2049)),
    '22001', 'V15.3 blob_get with a 2049-byte key');
SELECT pg_temp.rejects(format('SELECT sandbox_persist.blob_head(%L)', repeat('k', 2049)),
    '22001', 'V15.4 blob_head with a 2049-byte key');
SELECT pg_temp.rejects(format('SELECT sandbox_persist.blob_delete(%L)', repeat('k', 2049)),
    '22001', 'V15.5 blob_delete with a 2049-byte key');
SELECT pg_temp.rejects(format('SELECT sandbox_persist.blob_upload_begin(%L)', repeat('k', 2049)),
    '22001', 'V15.6 blob_upload_begin with a 2049-byte key');
SELECT is(sandbox_persist.blob_put(repeat('é', 1024), '\x0102')->>'key', repeat('é', 1024),
    'V15.7 a key of exactly 2048 UTF-8 bytes is accepted');
SELECT is((SELECT body FROM sandbox_persist.blob_get(repeat('é', 1024))), '\x0102'::bytea,
    'V15.8 the 2048-byte key reads back');
SELECT is(sandbox_persist.blob_put(repeat('k', 2048), '\x03')->>'key', repeat('k', 2048),
    'V15.9 a 2048-character ASCII key is accepted');
SELECT is(pg_temp.keys(sandbox_persist.blob_list('kkkk')), ARRAY[repeat('k', 2048)],
    'V15.10 the 2048-byte key lists');
SELECT is(sandbox_persist.blob_delete(repeat('k', 2048)), true,
    'V15.11 the 2048-byte key deletes');

SELECT pg_temp.rejects($$SELECT sandbox_persist.blob_put('', '\x01')$$, '22023',
    'V16.1 blob_put with an empty key');
SELECT pg_temp.rejects($$SELECT sandbox_persist.blob_upload_begin('')$$, '22023',
    'V16.2 blob_upload_begin with an empty key');

SELECT * FROM finish();
ROLLBACK;
