-- pgTAP: blob storage, streamed uploads and content addressing
-- (docs/contract/blobs.md §6, maintenance.md §2 A1, README.md §5).
-- Cases: B1-B15, B18-B22 (B16 and B23 are NODE; B17 is the isolation spec
-- b17_etag_unique).
-- Run with: pg_prove -d <db> test/pgtap/blob_storage.sql
-- as a superuser, with sandbox_persist.allow_test_reset on for the database
-- (allow_client_clock and the blob settings are changed with SET LOCAL).
BEGIN;
SELECT plan(254);
SELECT sandbox_persist._reset_for_tests();
-- now_ms arguments (the injected clock) need this superuser setting.
SET LOCAL sandbox_persist.allow_client_clock = on;
SET LOCAL sandbox_persist.blob_chunk_size = '4kB';
-- This file checks the chunk layout, so every object is stored in chunks;
-- small objects kept inline in their blobs row are checked by blob_inline.sql.
SET LOCAL sandbox_persist.blob_inline_max = 0;

------------------------------------------------------------------------------
-- Helpers (temporary, gone at ROLLBACK).
------------------------------------------------------------------------------

-- n pseudo-random bytes (a SHA-256 chain; pgcrypto is not needed).
\ir lib/blob_helpers.psql


-- 'SQLSTATE CODE_NAME', the name the SQLSTATE has in the error table
-- (error_codes()), when errdetail is a sentence that does not start with it.
CREATE FUNCTION pg_temp.sp_code(sql text) RETURNS text LANGUAGE sql AS $$
    SELECT CASE WHEN e[1] IS NULL THEN 'no error'
                ELSE e[1] || ' ' || coalesce((SELECT c->>'codeName' FROM json_array_elements(sandbox_persist.error_codes()) c WHERE c->>'sqlstate' = e[1]
                                              AND coalesce(e[3], '') !~ '^[A-Z][A-Z0-9_]+: '),
                                             '<detail: ' || coalesce(e[3], 'none') || '>')
           END
    FROM (SELECT pg_temp.attempt(sql) AS e) s
$$;

-- A contract error: SQLSTATE and its code name, then that
-- nothing changed.
CREATE FUNCTION pg_temp.rejects_sp(sql text, code text, code_name text, descr text)
RETURNS SETOF text LANGUAGE plpgsql AS $$
DECLARE
    before text := pg_temp.state();
    a text[] := pg_temp.attempt(sql);
BEGIN
    RETURN NEXT is(pg_temp.sp_code(sql), code || ' ' || code_name,
                   descr || ' -> ' || code || ' ' || code_name);
    RETURN NEXT is(coalesce(a[4], pg_temp.state()), before, descr || ': nothing changed');
END
$$;

-- The chunk version a key points at.
CREATE FUNCTION pg_temp.ver(k text) RETURNS bigint LANGUAGE sql AS $$
    SELECT version FROM sandbox_persist.blobs WHERE blob_key = k
$$;

-- Chunk layout of a key's current version: 'offset:raw_length:codec ...'.
CREATE FUNCTION pg_temp.layout(k text) RETURNS text LANGUAGE sql AS $$
    SELECT coalesce(string_agg(format('%s:%s:%s', c.chunk_offset, c.raw_length, c.codec), ' '
                               ORDER BY c.chunk_offset), '')
    FROM sandbox_persist.blobs b JOIN sandbox_persist.blob_chunks c ON c.version = b.version
    WHERE b.blob_key = k
$$;

-- Every chunk row of a key's current version, data digests included.
CREATE FUNCTION pg_temp.chunk_rows(k text) RETURNS text LANGUAGE sql AS $$
    SELECT coalesce(string_agg(format('%s/%s/%s/%s/%s', c.version, c.chunk_offset, c.raw_length,
                                      c.codec, md5(c.data)), ' ' ORDER BY c.chunk_offset), '')
    FROM sandbox_persist.blobs b JOIN sandbox_persist.blob_chunks c ON c.version = b.version
    WHERE b.blob_key = k
$$;

CREATE FUNCTION pg_temp.nchunks(k text) RETURNS bigint LANGUAGE sql AS $$
    SELECT count(*) FROM sandbox_persist.blobs b
      JOIN sandbox_persist.blob_chunks c ON c.version = b.version
     WHERE b.blob_key = k
$$;

CREATE FUNCTION pg_temp.all_chunks() RETURNS bigint LANGUAGE sql AS $$
    SELECT count(*) FROM sandbox_persist.blob_chunks
$$;

-- Chunk rows of a version no object and no open upload points at.
CREATE FUNCTION pg_temp.orphans() RETURNS bigint LANGUAGE sql AS $$
    SELECT count(*) FROM sandbox_persist.blob_chunks c
     WHERE NOT EXISTS (SELECT 1 FROM sandbox_persist.blobs b WHERE b.version = c.version)
       AND NOT EXISTS (SELECT 1 FROM sandbox_persist.blob_uploads u WHERE u.version = c.version)
$$;

-- Chunk rows staged by an open upload.
CREATE FUNCTION pg_temp.staged(id text) RETURNS bigint LANGUAGE sql AS $$
    SELECT count(*) FROM sandbox_persist.blob_chunks c
      JOIN sandbox_persist.blob_uploads u ON u.version = c.version
     WHERE u.upload_id = id::uuid
$$;

CREATE FUNCTION pg_temp.relied(k text) RETURNS bigint LANGUAGE sql AS $$
    SELECT relied_on_at FROM sandbox_persist.blobs WHERE blob_key = k
$$;

-- A content address of some bytes.
CREATE FUNCTION pg_temp.ca(prefix text, b bytea) RETURNS text LANGUAGE sql AS $$
    SELECT prefix || '/sha256/' || encode(sha256(b), 'hex')
$$;

CREATE FUNCTION pg_temp.id(name text) RETURNS text LANGUAGE sql AS $$
    SELECT pg_temp.got(name) #>> '{}'
$$;

------------------------------------------------------------------------------
-- B1: objects spanning several chunks (chunk size 4kB).
------------------------------------------------------------------------------
SELECT is(current_setting('sandbox_persist.blob_chunk_size'), '4kB',
    'B1.1 the test runs with 4 kB chunks');
DO $$BEGIN PERFORM sandbox_persist.blob_put('b1/obj', pg_temp.rnd(12388, 'b1')); END$$;
SELECT is(pg_temp.d(pg_temp.body('b1/obj')), pg_temp.d(pg_temp.rnd(12388, 'b1')),
    'B1.2 a 12388-byte object round-trips exactly');
SELECT is(pg_temp.nchunks('b1/obj'), 4::bigint,
    'B1.3 it is stored in ceil(12388 / 4096) = 4 chunks');
SELECT is(pg_temp.layout('b1/obj'), '0:4096:0 4096:4096:0 8192:4096:0 12288:100:0',
    'B1.4 the chunks start at 0, 4096, 8192, 12288 and hold 4096, 4096, 4096, 100 bytes');
DO $$BEGIN PERFORM sandbox_persist.blob_put('b1/exact', pg_temp.pat(8192)); END$$;
SELECT is(pg_temp.nchunks('b1/exact'), 2::bigint,
    'B1.5 an object of exactly two chunk sizes is stored in 2 chunks');
SELECT is(pg_temp.d(pg_temp.body('b1/exact')), pg_temp.d(pg_temp.pat(8192)),
    'B1.6 that object round-trips exactly');
DO $$BEGIN PERFORM sandbox_persist.blob_put('b1/small', '\x0102'); END$$;
SELECT is(pg_temp.layout('b1/small'), '0:2:0',
    'B1.7 a 2-byte object is one raw chunk');
SELECT is(pg_temp.upload('b1.up', 'b1/streamed', NULL, pg_temp.rnd(9000, 'b1s'), 1000)->>'size', '9000',
    'B1.8 a 9000-byte streamed upload in 1000-byte pieces commits with size 9000');
SELECT is(pg_temp.layout('b1/streamed'), '0:4096:0 4096:4096:0 8192:808:0',
    'B1.9 the streamed object is cut into ceil(9000 / 4096) = 3 full-size chunks');
SELECT is(pg_temp.d(pg_temp.body('b1/streamed')), pg_temp.d(pg_temp.rnd(9000, 'b1s')),
    'B1.10 the streamed object round-trips exactly');
SELECT is(pg_temp.upload('b1.up2', 'b1/uneven', NULL, pg_temp.rnd(10000, 'b1u'), 5000)->>'size', '10000',
    'B1.11 pieces larger than a chunk commit with the right size');
SELECT is(pg_temp.layout('b1/uneven'), '0:4096:0 4096:4096:0 8192:1808:0',
    'B1.12 and are cut at chunk boundaries');
SELECT is(pg_temp.d(pg_temp.body('b1/uneven')), pg_temp.d(pg_temp.rnd(10000, 'b1u')),
    'B1.13 and round-trip exactly');

------------------------------------------------------------------------------
-- B2: compressible chunks are zstd, random ones raw.
------------------------------------------------------------------------------
DO $$BEGIN PERFORM sandbox_persist.blob_put('b2/text', convert_to(rpad('', 8192, 'compressible text '), 'UTF8')); END$$;
SELECT is(pg_temp.layout('b2/text'), '0:4096:1 4096:4096:1',
    'B2.1 compressible text is stored as zstd chunks (codec 1)');
SELECT cmp_ok((SELECT octet_length(c.data) FROM sandbox_persist.blob_chunks c
               WHERE c.version = pg_temp.ver('b2/text') AND c.chunk_offset = 0), '<', 4096,
    'B2.2 the compressed chunk is smaller than its raw length');
SELECT is(pg_temp.d(pg_temp.body('b2/text')), pg_temp.d(convert_to(rpad('', 8192, 'compressible text '), 'UTF8')),
    'B2.3 the compressed object reads back exactly');
DO $$BEGIN PERFORM sandbox_persist.blob_put('b2/random', pg_temp.rnd(4096, 'b2')); END$$;
SELECT is(pg_temp.layout('b2/random'), '0:4096:0',
    'B2.4 a random chunk is stored raw (codec 0)');
SELECT is(pg_temp.d((SELECT c.data FROM sandbox_persist.blob_chunks c WHERE c.version = pg_temp.ver('b2/random'))),
    pg_temp.d(pg_temp.rnd(4096, 'b2')),
    'B2.5 the raw chunk holds the bytes as they are');
SELECT is(pg_temp.d(pg_temp.body('b2/random')), pg_temp.d(pg_temp.rnd(4096, 'b2')),
    'B2.6 the random object reads back exactly');
DO $$BEGIN PERFORM sandbox_persist.blob_put('b2/mixed',
    decode(repeat('00', 4096), 'hex') || pg_temp.rnd(4096, 'b2m') || decode(repeat('ab', 100), 'hex')); END$$;
SELECT is(pg_temp.layout('b2/mixed'), '0:4096:1 4096:4096:0 8192:100:1',
    'B2.7 each chunk of one object is compressed on its own: zstd, raw, zstd');
SELECT is(pg_temp.d(pg_temp.body('b2/mixed')), pg_temp.d(decode(repeat('00', 4096), 'hex') || pg_temp.rnd(4096, 'b2m') || decode(repeat('ab', 100), 'hex')),
    'B2.8 the mixed object reads back exactly');
SELECT is(pg_temp.d(pg_temp.body('b2/mixed', 4000, 300)), pg_temp.d(substring(decode(repeat('00', 4096), 'hex') || pg_temp.rnd(4096, 'b2m') FROM 4001 FOR 300)),
    'B2.9 a range across a zstd and a raw chunk reads back exactly');
SELECT is((SELECT attstorage FROM pg_attribute
            WHERE attrelid = 'sandbox_persist.blob_chunks'::regclass AND attname = 'data'), 'e',
    'B2.10 the chunk column is STORAGE EXTERNAL (no second compression)');

------------------------------------------------------------------------------
-- B3: a corrupt chunk outside the range does not disturb a ranged read.
------------------------------------------------------------------------------
DO $$BEGIN PERFORM sandbox_persist.blob_put('b3/zstd', decode(repeat('5a', 12288), 'hex')); END$$;
SELECT is(pg_temp.layout('b3/zstd'), '0:4096:1 4096:4096:1 8192:4096:1',
    'B3.1 the object is three zstd chunks');
UPDATE sandbox_persist.blob_chunks SET data = '\x0000000000'
 WHERE version = pg_temp.ver('b3/zstd') AND chunk_offset = 4096;
SELECT is(pg_temp.d(pg_temp.body('b3/zstd', 0, 4096)), pg_temp.d(decode(repeat('5a', 4096), 'hex')),
    'B3.2 with the middle chunk corrupt, a range ending at its start still reads');
SELECT is(pg_temp.d(pg_temp.body('b3/zstd', 100, 50)), pg_temp.d(decode(repeat('5a', 50), 'hex')),
    'B3.3 a range inside the first chunk reads');
SELECT is(pg_temp.d(pg_temp.body('b3/zstd', 8192)), pg_temp.d(decode(repeat('5a', 4096), 'hex')),
    'B3.4 a range starting exactly at the last chunk reads');
SELECT is(pg_temp.d(pg_temp.body('b3/zstd', 12000, 100)), pg_temp.d(decode(repeat('5a', 100), 'hex')),
    'B3.5 a range inside the last chunk reads');
SELECT pg_temp.rejects($$SELECT * FROM sandbox_persist.blob_get('b3/zstd')$$, 'XX001',
    'B3.6 a whole read over the corrupt zstd chunk');
SELECT pg_temp.rejects($$SELECT * FROM sandbox_persist.blob_get('b3/zstd', 4000, 200)$$, 'XX001',
    'B3.7 a range touching the corrupt chunk');
DO $$BEGIN PERFORM sandbox_persist.blob_put('b3/raw', pg_temp.rnd(12288, 'b3')); END$$;
UPDATE sandbox_persist.blob_chunks SET data = substring(data FROM 1 FOR 4000)
 WHERE version = pg_temp.ver('b3/raw') AND chunk_offset = 0;
SELECT is(pg_temp.d(pg_temp.body('b3/raw', 4096, 8192)), pg_temp.d(substring(pg_temp.rnd(12288, 'b3') FROM 4097)),
    'B3.8 with a truncated raw first chunk, a range over the other two reads exactly');
SELECT pg_temp.rejects($$SELECT * FROM sandbox_persist.blob_get('b3/raw')$$, 'XX001',
    'B3.9 a whole read over the truncated raw chunk');
SELECT pg_temp.rejects($$SELECT * FROM sandbox_persist.blob_get('b3/raw', 0, 1)$$, 'XX001',
    'B3.10 a 1-byte range in the truncated raw chunk');
DO $$BEGIN PERFORM sandbox_persist.blob_put('b3/len', decode(repeat('77', 8192), 'hex')); END$$;
UPDATE sandbox_persist.blob_chunks SET raw_length = 4000
 WHERE version = pg_temp.ver('b3/len') AND chunk_offset = 4096;
SELECT pg_temp.rejects($$SELECT * FROM sandbox_persist.blob_get('b3/len')$$, 'XX001',
    'B3.11 a whole read of a zstd chunk whose raw_length is wrong');
SELECT is(pg_temp.d(pg_temp.body('b3/len', 0, 4096)), pg_temp.d(decode(repeat('77', 4096), 'hex')),
    'B3.12 the intact first chunk of that object still reads');

------------------------------------------------------------------------------
-- B4: ranges and chunk boundaries (chunks of 4096 bytes).
------------------------------------------------------------------------------
DO $$BEGIN PERFORM sandbox_persist.blob_put('b4/obj', pg_temp.pat(12298)); END$$;
SELECT is(pg_temp.d(pg_temp.body('b4/obj', 4000, 200)), pg_temp.d(substring(pg_temp.pat(12298) FROM 4001 FOR 200)),
    'B4.1 a range crossing a chunk boundary');
SELECT is(pg_temp.d(pg_temp.body('b4/obj', 4000, 96)), pg_temp.d(substring(pg_temp.pat(12298) FROM 4001 FOR 96)),
    'B4.2 a range ending exactly on a chunk boundary');
SELECT is(pg_temp.d(pg_temp.body('b4/obj', 0, 4096)), pg_temp.d(substring(pg_temp.pat(12298) FROM 1 FOR 4096)),
    'B4.3 exactly the first chunk');
SELECT is(pg_temp.d(pg_temp.body('b4/obj', 4096, 10)), pg_temp.d(substring(pg_temp.pat(12298) FROM 4097 FOR 10)),
    'B4.4 a range starting exactly on a chunk boundary');
SELECT is(pg_temp.d(pg_temp.body('b4/obj', 4095, 2)), pg_temp.d(substring(pg_temp.pat(12298) FROM 4096 FOR 2)),
    'B4.5 the two bytes on either side of a boundary');
SELECT is(pg_temp.d(pg_temp.body('b4/obj', 4090, 4110)), pg_temp.d(substring(pg_temp.pat(12298) FROM 4091 FOR 4110)),
    'B4.6 a range crossing two boundaries');
SELECT is(pg_temp.d(pg_temp.body('b4/obj', 12297, 1)), pg_temp.d(substring(pg_temp.pat(12298) FROM 12298)),
    'B4.7 only the last byte, with a length');
SELECT is(pg_temp.d(pg_temp.body('b4/obj', 12297)), pg_temp.d(substring(pg_temp.pat(12298) FROM 12298)),
    'B4.8 only the last byte, without a length');
SELECT is((SELECT record::jsonb->'range' FROM sandbox_persist.blob_get('b4/obj', 12297)),
    '{"offset":12297,"length":1}'::jsonb,
    'B4.9 the last-byte read reports range {12297,1}');
SELECT is(pg_temp.d(pg_temp.body('b4/obj', 12288)), pg_temp.d(substring(pg_temp.pat(12298) FROM 12289)),
    'B4.10 exactly the short last chunk');
SELECT is(pg_temp.d(pg_temp.body('b4/obj', 1, 12296)), pg_temp.d(substring(pg_temp.pat(12298) FROM 2 FOR 12296)),
    'B4.11 everything but the first and last byte');
SELECT is(pg_temp.d(pg_temp.body('b4/obj', 8191, 100000)), pg_temp.d(substring(pg_temp.pat(12298) FROM 8192)),
    'B4.12 a long length from just before a boundary is clamped to the end');

------------------------------------------------------------------------------
-- B5: staged upload bytes are invisible before commit.
------------------------------------------------------------------------------
DO $$BEGIN PERFORM pg_temp.keep('b5.old', sandbox_persist.blob_put('b5/obj', '\x6f6c64',
    '{"contentType":"text/old"}', 1000)); END$$;
DO $$BEGIN
    PERFORM pg_temp.keep('b5.id', to_json(sandbox_persist.blob_upload_begin('b5/obj',
        '{"contentType":"text/new"}', 2000)));
    PERFORM pg_temp.keep('b5.id2', to_json(sandbox_persist.blob_upload_begin('b5/new', NULL, 2000)));
    PERFORM sandbox_persist.blob_upload_append(pg_temp.id('b5.id'), 0, pg_temp.rnd(10000, 'b5'), 2000);
    PERFORM sandbox_persist.blob_upload_append(pg_temp.id('b5.id2'), 0, pg_temp.rnd(5000, 'b5n'), 2000);
END$$;
SELECT is(pg_temp.staged(pg_temp.id('b5.id')), 2::bigint,
    'B5.1 the upload has staged two full chunks (the bytes exist in storage)');
SELECT is((SELECT record::jsonb FROM sandbox_persist.blob_get('b5/obj')), pg_temp.got('b5.old')::jsonb,
    'B5.2 get shows the old record');
SELECT is(pg_temp.d(pg_temp.body('b5/obj')), pg_temp.d('\x6f6c64'::bytea),
    'B5.3 get shows the old bytes');
SELECT is(pg_temp.d(pg_temp.body('b5/obj', 0, 100)), pg_temp.d('\x6f6c64'::bytea),
    'B5.4 a ranged get shows the old bytes');
SELECT is(sandbox_persist.blob_head('b5/obj')::jsonb, pg_temp.got('b5.old')::jsonb,
    'B5.5 head shows the old record');
SELECT is(sandbox_persist.blob_list('b5/')::jsonb,
    json_build_object('objects', json_build_array(pg_temp.got('b5.old')), 'truncated', false)::jsonb,
    'B5.6 list shows only the old object (the new key is not listed)');
SELECT is((SELECT count(*) FROM sandbox_persist.blob_get('b5/new')), 0::bigint,
    'B5.7 get of a key that only has a staged upload returns no row');
SELECT ok(sandbox_persist.blob_head('b5/new') IS NULL,
    'B5.8 head of that key is NULL');
SELECT is(pg_temp.keys(sandbox_persist.blob_list()), ARRAY(SELECT blob_key FROM sandbox_persist.blobs ORDER BY blob_key),
    'B5.9 an unfiltered list holds exactly the published objects');
SELECT ok(NOT ('b5/new' = ANY (pg_temp.keys(sandbox_persist.blob_list()))),
    'B5.10 the unfiltered list does not hold the staged key');
DO $$BEGIN PERFORM sandbox_persist.blob_upload_commit(pg_temp.id('b5.id'), 3000); END$$;
SELECT is(pg_temp.d(pg_temp.body('b5/obj')), pg_temp.d(pg_temp.rnd(10000, 'b5')),
    'B5.11 after commit get shows the new bytes');
SELECT is(sandbox_persist.blob_head('b5/obj')->>'contentType', 'text/new',
    'B5.12 after commit head shows the new record');
SELECT ok(sandbox_persist.blob_head('b5/new') IS NULL,
    'B5.13 the other upload is still invisible');

------------------------------------------------------------------------------
-- B6: commit publishes atomically with the overwrite rules of put.
------------------------------------------------------------------------------
DO $$BEGIN PERFORM pg_temp.keep('b6.old', sandbox_persist.blob_put('b6/obj', pg_temp.rnd(6000, 'b6old'),
    '{"contentType":"a/old","customMetadata":{"v":"old"}}', 1000)); END$$;
DO $$BEGIN PERFORM pg_temp.keep('b6.oldver', to_json(pg_temp.ver('b6/obj'))); END$$;
DO $$BEGIN
    PERFORM pg_temp.keep('b6.id', to_json(sandbox_persist.blob_upload_begin('b6/obj',
        '{"contentType":"a/new"}', 1500)));
    PERFORM sandbox_persist.blob_upload_append(pg_temp.id('b6.id'), 0,
        substring(pg_temp.rnd(10500, 'b6') FROM 1 FOR 3000), 2000);
    PERFORM sandbox_persist.blob_upload_append(pg_temp.id('b6.id'), 3000,
        substring(pg_temp.rnd(10500, 'b6') FROM 3001 FOR 5000), 2100);
    PERFORM sandbox_persist.blob_upload_append(pg_temp.id('b6.id'), 8000,
        substring(pg_temp.rnd(10500, 'b6') FROM 8001), 2200);
END$$;
SELECT is(pg_temp.keep('b6', sandbox_persist.blob_upload_commit(pg_temp.id('b6.id'), 3000))::jsonb - 'etag',
    '{"key":"b6/obj","size":10500,"contentType":"a/new","createdAt":1000,"updatedAt":3000}'::jsonb,
    'B6.1 commit returns size 3000+5000+2500, the new type, no metadata, createdAt kept, updatedAt = commit');
SELECT isnt(pg_temp.got('b6')->>'etag', pg_temp.got('b6.old')->>'etag',
    'B6.2 the committed object has a new etag');
SELECT is(pg_temp.d(pg_temp.body('b6/obj')), pg_temp.d(pg_temp.rnd(10500, 'b6')),
    'B6.3 get returns exactly the appended bytes');
SELECT is((SELECT record::jsonb FROM sandbox_persist.blob_get('b6/obj')), pg_temp.got('b6')::jsonb,
    'B6.4 get returns the committed record');
SELECT is(sandbox_persist.blob_head('b6/obj')::jsonb, pg_temp.got('b6')::jsonb,
    'B6.5 head returns the committed record');
SELECT is(pg_temp.layout('b6/obj'), '0:4096:0 4096:4096:0 8192:2308:0',
    'B6.6 the committed object is stored in ceil(10500 / 4096) chunks');
SELECT is((SELECT count(*) FROM sandbox_persist.blob_chunks
            WHERE version = (pg_temp.got('b6.oldver') #>> '{}')::bigint), 0::bigint,
    'B6.7 the replaced version has no chunks left');
SELECT is((SELECT count(*) FROM sandbox_persist.blob_uploads WHERE upload_id = pg_temp.id('b6.id')::uuid),
    0::bigint,
    'B6.8 the upload row is gone after commit');
SELECT is(pg_temp.upload('b6.m', 'b6/obj', '{"customMetadata":{"v":"new"}}', '\x0102', 1, 4000)::jsonb - 'etag',
    '{"key":"b6/obj","size":2,"customMetadata":{"v":"new"},"createdAt":1000,"updatedAt":4000}'::jsonb,
    'B6.9 a second commit replaces type and metadata whole (type now absent)');
SELECT is(pg_temp.upload('b6.n', 'b6/fresh', NULL, '\x010203', 2, 5000)::jsonb - 'etag',
    '{"key":"b6/fresh","size":3,"createdAt":5000,"updatedAt":5000}'::jsonb,
    'B6.10 a commit to a new key stamps createdAt = updatedAt = the commit time');
SELECT is(pg_temp.upload('b6.e', 'b6/empty', NULL, ''::bytea, 1, 6000)->>'size', '0',
    'B6.11 a commit with no appends publishes a 0-byte object');
SELECT is(pg_temp.d(pg_temp.body('b6/empty')), pg_temp.d(''::bytea),
    'B6.12 the 0-byte committed object reads back empty');
SELECT is(pg_temp.nchunks('b6/empty'), 0::bigint,
    'B6.13 the 0-byte committed object has no chunks');
SELECT is(pg_temp.orphans(), 0::bigint,
    'B6.14 no chunk rows are orphaned by the commits');

------------------------------------------------------------------------------
-- B7: abort leaves the existing object untouched.
------------------------------------------------------------------------------
DO $$BEGIN PERFORM pg_temp.keep('b7.old', sandbox_persist.blob_put('b7/obj', pg_temp.rnd(5000, 'b7old'),
    '{"contentType":"a/old"}', 1000)); END$$;
DO $$BEGIN PERFORM pg_temp.keep('b7.state', to_json(pg_temp.state())); END$$;
DO $$BEGIN
    PERFORM pg_temp.keep('b7.id', to_json(sandbox_persist.blob_upload_begin('b7/obj',
        '{"contentType":"a/new"}', 2000)));
    PERFORM sandbox_persist.blob_upload_append(pg_temp.id('b7.id'), 0, pg_temp.rnd(10000, 'b7'), 2000);
END$$;
SELECT is(pg_temp.staged(pg_temp.id('b7.id')), 2::bigint,
    'B7.1 the upload staged two chunks before the abort');
SELECT is(sandbox_persist.blob_upload_abort(pg_temp.id('b7.id')), true,
    'B7.2 abort returns true');
SELECT is(pg_temp.state(), pg_temp.got('b7.state') #>> '{}',
    'B7.3 after abort every blob, chunk and upload row is as before the upload');
SELECT is((SELECT record::jsonb FROM sandbox_persist.blob_get('b7/obj')), pg_temp.got('b7.old')::jsonb,
    'B7.4 the existing object keeps its record');
SELECT is(pg_temp.d(pg_temp.body('b7/obj')), pg_temp.d(pg_temp.rnd(5000, 'b7old')),
    'B7.5 the existing object keeps its bytes');
SELECT pg_temp.rejects_sp(format('SELECT sandbox_persist.blob_upload_append(%L, 10000, %L)',
                                 pg_temp.id('b7.id'), '\x01'),
    'SP302', 'BLOB_UPLOAD_NOT_FOUND', 'B7.6 append to an aborted upload');
SELECT pg_temp.rejects_sp(format('SELECT sandbox_persist.blob_upload_commit(%L)', pg_temp.id('b7.id')),
    'SP302', 'BLOB_UPLOAD_NOT_FOUND', 'B7.7 commit of an aborted upload');
SELECT pg_temp.rejects_sp(format('SELECT sandbox_persist.blob_upload_abort(%L)', pg_temp.id('b7.id')),
    'SP302', 'BLOB_UPLOAD_NOT_FOUND', 'B7.8 a second abort');
DO $$BEGIN
    PERFORM pg_temp.keep('b7.id2', to_json(sandbox_persist.blob_upload_begin('b7/new')));
    PERFORM sandbox_persist.blob_upload_append(pg_temp.id('b7.id2'), 0, pg_temp.rnd(9000, 'b7n'));
    PERFORM sandbox_persist.blob_upload_abort(pg_temp.id('b7.id2'));
END$$;
SELECT ok(sandbox_persist.blob_head('b7/new') IS NULL,
    'B7.9 an aborted upload to a new key leaves no object');
SELECT is(pg_temp.state(), pg_temp.got('b7.state') #>> '{}',
    'B7.10 and no chunk or upload rows');

------------------------------------------------------------------------------
-- B8: an append at the wrong offset changes nothing.
------------------------------------------------------------------------------
DO $$BEGIN PERFORM pg_temp.keep('b8.id', to_json(sandbox_persist.blob_upload_begin('b8/obj'))); END$$;
SELECT is(sandbox_persist.blob_upload_append(pg_temp.id('b8.id'), 0, pg_temp.rnd(5000, 'b8a'))::jsonb,
    '{"received":5000}'::jsonb,
    'B8.1 the first append at offset 0 reports received 5000');
SELECT pg_temp.rejects_sp(format('SELECT sandbox_persist.blob_upload_append(%L, 0, %L::bytea)',
                                 pg_temp.id('b8.id'), pg_temp.rnd(5000, 'b8a')),
    'SP303', 'BLOB_UPLOAD_OFFSET_MISMATCH', 'B8.2 a retry of the first piece at offset 0');
SELECT pg_temp.rejects_sp(format('SELECT sandbox_persist.blob_upload_append(%L, 4999, %L)',
                                 pg_temp.id('b8.id'), '\x01'),
    'SP303', 'BLOB_UPLOAD_OFFSET_MISMATCH', 'B8.3 an append at offset 4999 (one short)');
SELECT pg_temp.rejects_sp(format('SELECT sandbox_persist.blob_upload_append(%L, 5001, %L)',
                                 pg_temp.id('b8.id'), '\x01'),
    'SP303', 'BLOB_UPLOAD_OFFSET_MISMATCH', 'B8.4 an append at offset 5001 (a gap)');
SELECT pg_temp.rejects_sp(format('SELECT sandbox_persist.blob_upload_append(%L, -1, %L)',
                                 pg_temp.id('b8.id'), '\x01'),
    'SP303', 'BLOB_UPLOAD_OFFSET_MISMATCH', 'B8.5 an append at offset -1');
SELECT is(sandbox_persist.blob_upload_append(pg_temp.id('b8.id'), 5000, pg_temp.rnd(3000, 'b8b'))::jsonb,
    '{"received":8000}'::jsonb,
    'B8.6 the retry at the right offset succeeds and reports received 8000');
SELECT is(sandbox_persist.blob_upload_commit(pg_temp.id('b8.id'))->>'size', '8000',
    'B8.7 commit stores 8000 bytes (nothing duplicated)');
SELECT is(pg_temp.d(pg_temp.body('b8/obj')), pg_temp.d(pg_temp.rnd(5000, 'b8a') || pg_temp.rnd(3000, 'b8b')),
    'B8.8 the object is exactly the two accepted pieces');

------------------------------------------------------------------------------
-- B9: committed and unknown upload ids.
------------------------------------------------------------------------------
SELECT pg_temp.rejects_sp(format('SELECT sandbox_persist.blob_upload_append(%L, 8000, %L)',
                                 pg_temp.id('b8.id'), '\x01'),
    'SP302', 'BLOB_UPLOAD_NOT_FOUND', 'B9.1 append after commit');
SELECT pg_temp.rejects_sp(format('SELECT sandbox_persist.blob_upload_commit(%L)', pg_temp.id('b8.id')),
    'SP302', 'BLOB_UPLOAD_NOT_FOUND', 'B9.2 commit after commit');
SELECT pg_temp.rejects_sp(format('SELECT sandbox_persist.blob_upload_abort(%L)', pg_temp.id('b8.id')),
    'SP302', 'BLOB_UPLOAD_NOT_FOUND', 'B9.3 abort after commit');
SELECT pg_temp.rejects_sp($$SELECT sandbox_persist.blob_upload_append('00000000-0000-0000-0000-000000000000', 0, '\x01')$$,
    'SP302', 'BLOB_UPLOAD_NOT_FOUND', 'B9.4 append with an unknown id');
SELECT pg_temp.rejects_sp($$SELECT sandbox_persist.blob_upload_commit('00000000-0000-0000-0000-000000000000')$$,
    'SP302', 'BLOB_UPLOAD_NOT_FOUND', 'B9.5 commit with an unknown id');
SELECT pg_temp.rejects_sp($$SELECT sandbox_persist.blob_upload_abort('00000000-0000-0000-0000-000000000000')$$,
    'SP302', 'BLOB_UPLOAD_NOT_FOUND', 'B9.6 abort with an unknown id');
SELECT pg_temp.rejects_sp($$SELECT sandbox_persist.blob_upload_commit('not-an-upload')$$,
    'SP302', 'BLOB_UPLOAD_NOT_FOUND', 'B9.7 commit with an id that is not a UUID');
SELECT pg_temp.rejects_sp($$SELECT sandbox_persist.blob_upload_append('not-an-upload', 0, '\x01')$$,
    'SP302', 'BLOB_UPLOAD_NOT_FOUND', 'B9.8 append with an id that is not a UUID');

------------------------------------------------------------------------------
-- B10: a content-addressed put must hash to its key.
------------------------------------------------------------------------------
SELECT pg_temp.rejects_sp(format('SELECT sandbox_persist.blob_put(%L, %L::bytea)',
                                 pg_temp.ca('sandbox-files', 'b10 good'::bytea), 'b10 bad'::bytea),
    'SP301', 'BLOB_CONTENT_HASH_MISMATCH', 'B10.1 a put whose bytes hash differently (new key)');
SELECT ok(sandbox_persist.blob_head(pg_temp.ca('sandbox-files', 'b10 good'::bytea)) IS NULL,
    'B10.2 nothing was stored under the key');
SELECT is(sandbox_persist.blob_put(pg_temp.ca('sandbox-files', 'b10 good'::bytea), 'b10 good'::bytea)->>'size',
    '8', 'B10.3 the right bytes are accepted');
DO $$BEGIN PERFORM pg_temp.keep('b10.rec', sandbox_persist.blob_head(pg_temp.ca('sandbox-files', 'b10 good'::bytea))); END$$;
SELECT pg_temp.rejects_sp(format('SELECT sandbox_persist.blob_put(%L, %L::bytea)',
                                 pg_temp.ca('sandbox-files', 'b10 good'::bytea), 'b10 bad'::bytea),
    'SP301', 'BLOB_CONTENT_HASH_MISMATCH', 'B10.4 a put with the wrong bytes over an existing object');
SELECT is(pg_temp.d(pg_temp.body(pg_temp.ca('sandbox-files', 'b10 good'::bytea))), pg_temp.d('b10 good'::bytea),
    'B10.5 the existing object keeps its bytes');
SELECT is(sandbox_persist.blob_head(pg_temp.ca('sandbox-files', 'b10 good'::bytea))::jsonb,
    pg_temp.got('b10.rec')::jsonb,
    'B10.6 the existing object keeps its record');
SELECT pg_temp.rejects_sp(format('SELECT sandbox_persist.blob_put(%L, %L::bytea)',
                                 pg_temp.ca('sandbox-artifacts', 'b10 art'::bytea), ''::bytea),
    'SP301', 'BLOB_CONTENT_HASH_MISMATCH', 'B10.7 an empty body under a sandbox-artifacts address');
SELECT is(sandbox_persist.blob_put(pg_temp.ca('sandbox-artifacts', 'b10 art'::bytea), 'b10 art'::bytea)->>'size',
    '7', 'B10.8 a sandbox-artifacts address with the right bytes is accepted');
SELECT is(sandbox_persist.blob_put(pg_temp.ca('sandbox-files', ''::bytea), ''::bytea)->>'size',
    '0', 'B10.9 the address of the empty string accepts an empty body');

------------------------------------------------------------------------------
-- B11: a streamed upload to a content address is verified at commit.
------------------------------------------------------------------------------
DO $$BEGIN
    PERFORM pg_temp.keep('b11.id', to_json(sandbox_persist.blob_upload_begin(
        pg_temp.ca('sandbox-files', pg_temp.rnd(10000, 'b11')))));
    PERFORM sandbox_persist.blob_upload_append(pg_temp.id('b11.id'), 0, pg_temp.rnd(6000, 'b11'));
    PERFORM sandbox_persist.blob_upload_append(pg_temp.id('b11.id'), 6000,
        decode(repeat('00', 4000), 'hex'));
END$$;
SELECT pg_temp.rejects_sp(format('SELECT sandbox_persist.blob_upload_commit(%L)', pg_temp.id('b11.id')),
    'SP301', 'BLOB_CONTENT_HASH_MISMATCH', 'B11.1 commit of wrong content to a new content address');
SELECT ok(sandbox_persist.blob_head(pg_temp.ca('sandbox-files', pg_temp.rnd(10000, 'b11'))) IS NULL,
    'B11.2 no object appeared under the key');
DO $$BEGIN
    PERFORM sandbox_persist.blob_upload_abort(pg_temp.id('b11.id'));
    PERFORM pg_temp.keep('b11.id2', to_json(sandbox_persist.blob_upload_begin(
        pg_temp.ca('sandbox-files', 'b10 good'::bytea), '{"contentType":"x/changed"}')));
    PERFORM sandbox_persist.blob_upload_append(pg_temp.id('b11.id2'), 0, 'b10 bae'::bytea);
END$$;
SELECT pg_temp.rejects_sp(format('SELECT sandbox_persist.blob_upload_commit(%L)', pg_temp.id('b11.id2')),
    'SP301', 'BLOB_CONTENT_HASH_MISMATCH', 'B11.3 commit of wrong content over an existing content address');
SELECT is(sandbox_persist.blob_head(pg_temp.ca('sandbox-files', 'b10 good'::bytea))::jsonb,
    pg_temp.got('b10.rec')::jsonb,
    'B11.4 the existing object keeps its record');
SELECT is(pg_temp.d(pg_temp.body(pg_temp.ca('sandbox-files', 'b10 good'::bytea))), pg_temp.d('b10 good'::bytea),
    'B11.5 the existing object keeps its bytes');
DO $$BEGIN PERFORM sandbox_persist.blob_upload_abort(pg_temp.id('b11.id2')); END$$;
SELECT is(pg_temp.upload('b11.ok', pg_temp.ca('sandbox-artifacts', pg_temp.rnd(10000, 'b11')), NULL,
                         pg_temp.rnd(10000, 'b11'), 3333, 7000)::jsonb - 'etag',
    jsonb_build_object('key', pg_temp.ca('sandbox-artifacts', pg_temp.rnd(10000, 'b11')), 'size', 10000,
                       'createdAt', 7000, 'updatedAt', 7000),
    'B11.6 a streamed upload of the right content (10000 bytes in pieces of 3333) commits');
SELECT is(pg_temp.d(pg_temp.body(pg_temp.ca('sandbox-artifacts', pg_temp.rnd(10000, 'b11')))), pg_temp.d(pg_temp.rnd(10000, 'b11')),
    'B11.7 and reads back exactly');
SELECT is(pg_temp.orphans(), 0::bigint,
    'B11.8 no chunk rows are orphaned');
DO $$BEGIN
    PERFORM pg_temp.keep('b11.id3', to_json(sandbox_persist.blob_upload_begin(
        pg_temp.ca('sandbox-files', pg_temp.pat(8192, 2)))));
    PERFORM sandbox_persist.blob_upload_append(pg_temp.id('b11.id3'), 0, pg_temp.pat(8192, 3));
END$$;
SELECT pg_temp.rejects_sp(format('SELECT sandbox_persist.blob_upload_commit(%L)', pg_temp.id('b11.id3')),
    'SP301', 'BLOB_CONTENT_HASH_MISMATCH', 'B11.9 commit of chunk-aligned wrong content (8192 bytes) to a content address');
SELECT ok(sandbox_persist.blob_head(pg_temp.ca('sandbox-files', pg_temp.pat(8192, 2))) IS NULL,
    'B11.10 no object appeared under that key');

------------------------------------------------------------------------------
-- B12: a second put of a content address writes no chunk data.
------------------------------------------------------------------------------
DO $$BEGIN
    PERFORM pg_temp.keep('b12.first', sandbox_persist.blob_put(
        pg_temp.ca('sandbox-files', pg_temp.rnd(10000, 'b12')), pg_temp.rnd(10000, 'b12'),
        '{"contentType":"x/a","customMetadata":{"a":"1"}}', 1000));
    PERFORM pg_temp.keep('b12.rows', to_json(pg_temp.chunk_rows(pg_temp.ca('sandbox-files', pg_temp.rnd(10000, 'b12')))));
    PERFORM pg_temp.keep('b12.all', to_json(pg_temp.all_chunks()));
END$$;
SELECT is(pg_temp.nchunks(pg_temp.ca('sandbox-files', pg_temp.rnd(10000, 'b12'))), 3::bigint,
    'B12.1 the first put stored 3 chunks');
SELECT is(pg_temp.keep('b12.second', sandbox_persist.blob_put(
            pg_temp.ca('sandbox-files', pg_temp.rnd(10000, 'b12')), pg_temp.rnd(10000, 'b12'),
            '{"contentType":"x/b"}', 2000))::jsonb,
    jsonb_build_object('key', pg_temp.ca('sandbox-files', pg_temp.rnd(10000, 'b12')), 'size', 10000,
                       'etag', pg_temp.got('b12.first')->>'etag', 'contentType', 'x/b',
                       'createdAt', 1000, 'updatedAt', 2000),
    'B12.2 the second put returns a valid record: same etag and createdAt, new updatedAt, options replaced');
SELECT is(pg_temp.chunk_rows(pg_temp.ca('sandbox-files', pg_temp.rnd(10000, 'b12'))),
    pg_temp.got('b12.rows') #>> '{}',
    'B12.3 the object keeps the very same chunk rows (same version, same data)');
SELECT is(pg_temp.all_chunks(), (pg_temp.got('b12.all') #>> '{}')::bigint,
    'B12.4 the chunk table has no new rows');
SELECT is(sandbox_persist.blob_head(pg_temp.ca('sandbox-files', pg_temp.rnd(10000, 'b12')), 2000)::jsonb,
    pg_temp.got('b12.second')::jsonb,
    'B12.5 head returns the record of the second put');
SELECT is(pg_temp.d(pg_temp.body(pg_temp.ca('sandbox-files', pg_temp.rnd(10000, 'b12')))), pg_temp.d(pg_temp.rnd(10000, 'b12')),
    'B12.6 the bytes are intact');
SELECT is(pg_temp.relied(pg_temp.ca('sandbox-files', pg_temp.rnd(10000, 'b12'))), 2000::bigint,
    'B12.7 the second put refreshed the GC time');
SELECT is(pg_temp.upload('b12.up', pg_temp.ca('sandbox-files', pg_temp.rnd(10000, 'b12')), NULL,
                         pg_temp.rnd(10000, 'b12'), 4500, 3000)::jsonb,
    jsonb_build_object('key', pg_temp.ca('sandbox-files', pg_temp.rnd(10000, 'b12')), 'size', 10000,
                       'etag', pg_temp.got('b12.first')->>'etag', 'createdAt', 1000, 'updatedAt', 3000),
    'B12.8 a streamed upload of the same content also keeps etag and createdAt');
SELECT is(pg_temp.chunk_rows(pg_temp.ca('sandbox-files', pg_temp.rnd(10000, 'b12'))),
    pg_temp.got('b12.rows') #>> '{}',
    'B12.9 after that commit the object still has its original chunk rows');
SELECT is(pg_temp.all_chunks(), (pg_temp.got('b12.all') #>> '{}')::bigint,
    'B12.10 the staged copy was dropped: no new chunk rows');
SELECT is(pg_temp.orphans(), 0::bigint,
    'B12.11 no chunk rows are orphaned');
DO $$BEGIN
    PERFORM pg_temp.keep('b12.a', sandbox_persist.blob_put(
        pg_temp.ca('sandbox-files', pg_temp.pat(8192)), pg_temp.pat(8192), NULL, 1000));
    PERFORM pg_temp.keep('b12.arows', to_json(pg_temp.chunk_rows(pg_temp.ca('sandbox-files', pg_temp.pat(8192)))));
    PERFORM pg_temp.keep('b12.aall', to_json(pg_temp.all_chunks()));
END$$;
SELECT is(pg_temp.upload('b12.aup', pg_temp.ca('sandbox-files', pg_temp.pat(8192)), '{"contentType":"x/c"}',
                         pg_temp.pat(8192), 4096, 5000)::jsonb,
    jsonb_build_object('key', pg_temp.ca('sandbox-files', pg_temp.pat(8192)), 'size', 8192,
                       'etag', pg_temp.got('b12.a')->>'etag', 'contentType', 'x/c',
                       'createdAt', 1000, 'updatedAt', 5000),
    'B12.12 a chunk-aligned streamed upload of stored content keeps etag and createdAt');
SELECT is(pg_temp.chunk_rows(pg_temp.ca('sandbox-files', pg_temp.pat(8192))),
    pg_temp.got('b12.arows') #>> '{}',
    'B12.13 and the object keeps its original chunk rows');
SELECT is(pg_temp.all_chunks(), (pg_temp.got('b12.aall') #>> '{}')::bigint,
    'B12.14 and the staged copy was dropped');

------------------------------------------------------------------------------
-- B13: look-alike keys are ordinary keys.
------------------------------------------------------------------------------
SELECT is(sandbox_persist.blob_put(upper(pg_temp.ca('sandbox-files', 'b13'::bytea))::text, 'not the content'::bytea)->>'size',
    '15', 'B13.1 an upper-case SANDBOX-FILES/SHA256/<HEX> key is stored without verification');
SELECT is(sandbox_persist.blob_put('sandbox-files/sha256/' || upper(encode(sha256('b13'::bytea), 'hex')),
                                   'not the content'::bytea)->>'size',
    '15', 'B13.2 a key with upper-case hex digits is stored without verification');
SELECT is(sandbox_persist.blob_put('sandbox-files/sha256/' || left(encode(sha256('b13'::bytea), 'hex'), 63),
                                   'x'::bytea)->>'size',
    '1', 'B13.3 a key with 63 hex digits is stored without verification');
SELECT is(sandbox_persist.blob_put('sandbox-artifacts/sha256/' || encode(sha256('b13'::bytea), 'hex') || '0',
                                   'x'::bytea)->>'size',
    '1', 'B13.4 a key with 65 hex digits is stored without verification');
SELECT is(sandbox_persist.blob_put(pg_temp.ca('sandbox-files', 'b13'::bytea) || '/x', 'x'::bytea)->>'size',
    '1', 'B13.5 a content address followed by /x is stored without verification');
SELECT is(sandbox_persist.blob_put('sandbox-blobs/sha256/' || encode(sha256('b13'::bytea), 'hex'),
                                   'x'::bytea)->>'size',
    '1', 'B13.6 another store prefix is stored without verification');
SELECT is(pg_temp.d(pg_temp.body('sandbox-files/sha256/' || upper(encode(sha256('b13'::bytea), 'hex')))), pg_temp.d('not the content'::bytea),
    'B13.7 the look-alike object reads back its bytes');
SELECT is((SELECT count(*) FROM sandbox_persist.blobs
            WHERE relied_on_at IS NULL AND blob_key IN (
                upper(pg_temp.ca('sandbox-files', 'b13'::bytea)),
                'sandbox-files/sha256/' || upper(encode(sha256('b13'::bytea), 'hex')),
                'sandbox-files/sha256/' || left(encode(sha256('b13'::bytea), 'hex'), 63),
                'sandbox-artifacts/sha256/' || encode(sha256('b13'::bytea), 'hex') || '0',
                pg_temp.ca('sandbox-files', 'b13'::bytea) || '/x',
                'sandbox-blobs/sha256/' || encode(sha256('b13'::bytea), 'hex'))),
    6::bigint,
    'B13.8 look-alike keys carry no GC time');
DO $$BEGIN PERFORM pg_temp.keep('b13.first', sandbox_persist.blob_head(
    'sandbox-files/sha256/' || upper(encode(sha256('b13'::bytea), 'hex')))); END$$;
SELECT isnt(sandbox_persist.blob_put('sandbox-files/sha256/' || upper(encode(sha256('b13'::bytea), 'hex')),
                                     'not the content'::bytea)->>'etag',
    pg_temp.got('b13.first')->>'etag',
    'B13.9 re-putting the same bytes to a look-alike key is an ordinary overwrite (new etag)');
DO $$BEGIN PERFORM pg_temp.keep('b13.state', to_json(pg_temp.state())); END$$;
SELECT ok(sandbox_persist.blob_head('sandbox-files/sha256/' || upper(encode(sha256('b13'::bytea), 'hex')), 99999999) IS NOT NULL,
    'B13.10 head of a look-alike key works');
SELECT is(pg_temp.state(), pg_temp.got('b13.state') #>> '{}',
    'B13.11 head of a look-alike key is read-only');

------------------------------------------------------------------------------
-- B14: head refreshes the GC time at most once per quarter of the grace.
------------------------------------------------------------------------------
SET LOCAL sandbox_persist.blob_gc_grace = '1h';
DO $$BEGIN PERFORM pg_temp.keep('b14.rec', sandbox_persist.blob_put(
    pg_temp.ca('sandbox-files', 'b14'::bytea), 'b14'::bytea, NULL, 1000000)); END$$;
SELECT is(pg_temp.relied(pg_temp.ca('sandbox-files', 'b14'::bytea)), 1000000::bigint,
    'B14.1 put sets the GC time to its time');
DO $$BEGIN PERFORM sandbox_persist.blob_head(pg_temp.ca('sandbox-files', 'b14'::bytea), 1000001); END$$;
SELECT is(pg_temp.relied(pg_temp.ca('sandbox-files', 'b14'::bytea)), 1000000::bigint,
    'B14.2 a head 1 ms later does not refresh it');
DO $$BEGIN PERFORM sandbox_persist.blob_head(pg_temp.ca('sandbox-files', 'b14'::bytea), 1899999); END$$;
SELECT is(pg_temp.relied(pg_temp.ca('sandbox-files', 'b14'::bytea)), 1000000::bigint,
    'B14.3 a head 1 ms short of a quarter of 1h (900000 ms) does not refresh it');
SELECT is(sandbox_persist.blob_head(pg_temp.ca('sandbox-files', 'b14'::bytea), 1900001)::jsonb,
    pg_temp.got('b14.rec')::jsonb,
    'B14.4 a head after a quarter returns the unchanged record');
SELECT is(pg_temp.relied(pg_temp.ca('sandbox-files', 'b14'::bytea)), 1900001::bigint,
    'B14.5 and refreshes the GC time to the head time');
DO $$BEGIN PERFORM sandbox_persist.blob_head(pg_temp.ca('sandbox-files', 'b14'::bytea), 2799999); END$$;
SELECT is(pg_temp.relied(pg_temp.ca('sandbox-files', 'b14'::bytea)), 1900001::bigint,
    'B14.6 the next head within a quarter of the refresh does not refresh it');
DO $$BEGIN PERFORM sandbox_persist.blob_head(pg_temp.ca('sandbox-files', 'b14'::bytea), 2800002); END$$;
SELECT is(pg_temp.relied(pg_temp.ca('sandbox-files', 'b14'::bytea)), 2800002::bigint,
    'B14.7 a head more than a quarter after the refresh refreshes it again');
SELECT is(sandbox_persist.blob_head(pg_temp.ca('sandbox-files', 'b14'::bytea), 2800003)::jsonb,
    pg_temp.got('b14.rec')::jsonb,
    'B14.8 the refreshes did not change updatedAt, etag or anything else of the record');
SET LOCAL sandbox_persist.blob_gc_grace = '24h';
DO $$BEGIN PERFORM sandbox_persist.blob_head(pg_temp.ca('sandbox-files', 'b14'::bytea), 2800002 + 21599999); END$$;
SELECT is(pg_temp.relied(pg_temp.ca('sandbox-files', 'b14'::bytea)), 2800002::bigint,
    'B14.9 with a 24h grace, a head 1 ms short of 6h does not refresh it');
DO $$BEGIN PERFORM sandbox_persist.blob_head(pg_temp.ca('sandbox-files', 'b14'::bytea), 2800002 + 21600001); END$$;
SELECT is(pg_temp.relied(pg_temp.ca('sandbox-files', 'b14'::bytea)), 2800002 + 21600001::bigint,
    'B14.10 with a 24h grace, a head after 6h refreshes it');
DO $$BEGIN
    PERFORM sandbox_persist.blob_put('b14/plain', 'b14'::bytea, NULL, 1000);
    PERFORM pg_temp.keep('b14.state', to_json(pg_temp.state()));
    PERFORM sandbox_persist.blob_head('b14/plain', 999999999);
END$$;
SELECT is(pg_temp.state(), pg_temp.got('b14.state') #>> '{}',
    'B14.11 head of an ordinary key changes nothing');
SELECT ok(pg_temp.relied('b14/plain') IS NULL,
    'B14.12 an ordinary key has no GC time');

------------------------------------------------------------------------------
-- B15: 0-byte objects.
------------------------------------------------------------------------------
SELECT is(sandbox_persist.blob_put('b15/empty', ''::bytea, NULL, 1000)::jsonb - 'etag',
    '{"key":"b15/empty","size":0,"createdAt":1000,"updatedAt":1000}'::jsonb,
    'B15.1 a 0-byte put returns size 0');
SELECT is(pg_temp.nchunks('b15/empty'), 0::bigint,
    'B15.2 a 0-byte object has no chunks');
SELECT is(pg_temp.d(pg_temp.body('b15/empty')), pg_temp.d(''::bytea),
    'B15.3 it reads back empty');
SELECT ok((SELECT NOT (record::jsonb ? 'range') AND record->>'size' = '0'
             FROM sandbox_persist.blob_get('b15/empty')),
    'B15.4 the whole read reports size 0 and no range');
SELECT is(sandbox_persist.blob_list('b15/')::jsonb #> '{objects,0,size}', '0'::jsonb,
    'B15.5 it lists with size 0');
SELECT pg_temp.rejects($$SELECT * FROM sandbox_persist.blob_get('b15/empty', 0)$$, '22003',
    'B15.6 range {0} of a 0-byte object');
SELECT pg_temp.rejects($$SELECT * FROM sandbox_persist.blob_get('b15/empty', 0, 0)$$, '22003',
    'B15.7 range {0,0} of a 0-byte object');
SELECT pg_temp.rejects($$SELECT * FROM sandbox_persist.blob_get('b15/empty', 0, 1)$$, '22003',
    'B15.8 range {0,1} of a 0-byte object');
SELECT pg_temp.rejects($$SELECT * FROM sandbox_persist.blob_get('b15/empty', 1)$$, '22003',
    'B15.9 range {1} of a 0-byte object');
DO $$BEGIN PERFORM sandbox_persist.blob_put('b15/shrink', pg_temp.rnd(9000, 'b15')); END$$;
SELECT is(sandbox_persist.blob_put('b15/shrink', ''::bytea)->>'size', '0',
    'B15.10 overwriting a 3-chunk object with 0 bytes gives size 0');
SELECT is(pg_temp.nchunks('b15/shrink'), 0::bigint,
    'B15.11 and leaves it without chunks');
SELECT is(pg_temp.orphans(), 0::bigint,
    'B15.12 the old chunks are gone');

------------------------------------------------------------------------------
-- B18: customMetadata and contentType through the streamed path.
------------------------------------------------------------------------------
SELECT pg_temp.rejects($$SELECT sandbox_persist.blob_put('b18/obj', '\x01', '{"customMetadata":{"n":1}}')$$,
    '22023', 'B18.1 put with a number in customMetadata');
SELECT pg_temp.rejects($$SELECT sandbox_persist.blob_put('b15/empty', '\x01', '{"customMetadata":{"ok":"x","n":false}}')$$,
    '22023', 'B18.2 put over an existing object with a boolean in customMetadata');
SELECT pg_temp.rejects($$SELECT sandbox_persist.blob_upload_begin('b18/obj', '{"customMetadata":{"n":[]}}')$$,
    '22023', 'B18.3 upload_begin with an array in customMetadata');
SELECT pg_temp.rejects($$SELECT sandbox_persist.blob_put('b18/obj', '\x01', '{"contentType":7}')$$,
    '22023', 'B18.4 put with a non-string contentType');
SELECT is(pg_temp.upload('b18.m', 'b18/meta', '{"customMetadata":{}}', '\x01', 1)::jsonb -> 'customMetadata',
    '{}'::jsonb,
    'B18.5 customMetadata {} round-trips through a streamed upload (commit record)');
SELECT is(sandbox_persist.blob_head('b18/meta')::jsonb -> 'customMetadata', '{}'::jsonb,
    'B18.6 and through head');
SELECT is(sandbox_persist.blob_put('b18/meta2', '\x01', '{"customMetadata":{"k":"1","é":"ü"}}')::jsonb -> 'customMetadata',
    '{"k":"1","é":"ü"}'::jsonb,
    'B18.7 string values (including non-ASCII) are accepted and returned');
SELECT ok(NOT (pg_temp.upload('b18.t', 'b18/type', '{"contentType":""}', '\x01', 1)::jsonb ? 'contentType'),
    'B18.8 an empty contentType is omitted from the commit record');
SELECT ok(NOT (sandbox_persist.blob_head('b18/type')::jsonb ? 'contentType'),
    'B18.9 and from head');
SELECT ok(NOT (sandbox_persist.blob_list('b18/type')::jsonb #> '{objects,0}' ? 'contentType'),
    'B18.10 and from list');

------------------------------------------------------------------------------
-- B19: list order, cursors past the end, prefix + cursor, literal % and _.
------------------------------------------------------------------------------
DO $$BEGIN PERFORM sandbox_persist.blob_put(k, '\x00')
  FROM unnest(ARRAY['b19/' || U&'\+01F600', 'b19/' || U&'\E000', 'b19/a', 'b19/' || U&'\+010000',
                    'b19/' || U&'\FFFD', 'b19/é', 'b1a/x', 'b19%x/1', 'b19_x/1', 'b19ax/1',
                    'b19Ax/1', 'b19\x/1']) AS k; END$$;
SELECT is(pg_temp.keys(sandbox_persist.blob_list('b19/')),
    ARRAY['b19/a', 'b19/é', 'b19/' || U&'\E000', 'b19/' || U&'\FFFD', 'b19/' || U&'\+010000',
          'b19/' || U&'\+01F600'],
    'B19.1 keys list in UTF-8 byte order: astral keys after U+E000-U+FFFF');
SELECT is(sandbox_persist.blob_list('b19/', 'b19/' || U&'\+01F600')::jsonb,
    '{"objects":[],"truncated":false}'::jsonb,
    'B19.2 a cursor at the last key gives an empty, untruncated page');
SELECT is(sandbox_persist.blob_list('b19/', 'b19/' || U&'\+10FFFF', 1)::jsonb,
    '{"objects":[],"truncated":false}'::jsonb,
    'B19.3 a cursor past every key gives an empty, untruncated page');
SELECT is(pg_temp.keys(sandbox_persist.blob_list('b19/', 'b19/é')),
    ARRAY['b19/' || U&'\E000', 'b19/' || U&'\FFFD', 'b19/' || U&'\+010000', 'b19/' || U&'\+01F600'],
    'B19.4 prefix and cursor combine (keys after the cursor within the prefix only)');
SELECT is(pg_temp.keys(sandbox_persist.blob_list('b19/', 'a')),
    ARRAY['b19/a', 'b19/é', 'b19/' || U&'\E000', 'b19/' || U&'\FFFD', 'b19/' || U&'\+010000',
          'b19/' || U&'\+01F600'],
    'B19.5 a cursor before the prefix range lists the whole prefix');
SELECT is(sandbox_persist.blob_list('b19/', 'b19/' || U&'\FFFD', 1)::jsonb - 'objects',
    jsonb_build_object('truncated', true, 'cursor', 'b19/' || U&'\+010000'),
    'B19.6 paging past U+FFFD returns U+10000 next, cursor verbatim');
SELECT is(pg_temp.keys(sandbox_persist.blob_list('b19%')), ARRAY['b19%x/1'],
    'B19.7 % in a prefix is literal');
SELECT is(pg_temp.keys(sandbox_persist.blob_list('b19_')), ARRAY['b19_x/1'],
    'B19.8 _ in a prefix is literal');
SELECT is(pg_temp.keys(sandbox_persist.blob_list('b19\')), ARRAY['b19\x/1'],
    'B19.9 a backslash in a prefix is literal');
SELECT is(pg_temp.keys(sandbox_persist.blob_list('b19A')), ARRAY['b19Ax/1'],
    'B19.10 prefixes are case-sensitive');
SELECT is(pg_temp.keys(sandbox_persist.blob_list('b19/' || U&'\+01F600')), ARRAY['b19/' || U&'\+01F600'],
    'B19.11 an astral key is its own prefix');

------------------------------------------------------------------------------
-- B20: blob_max_read.
------------------------------------------------------------------------------
DO $$BEGIN PERFORM sandbox_persist.blob_put('b20/big', pg_temp.pat(10000)); END$$;
DO $$BEGIN PERFORM sandbox_persist.blob_put('b20/fits', pg_temp.pat(4096)); END$$;
SET LOCAL sandbox_persist.blob_max_read = '4kB';
SELECT pg_temp.rejects($$SELECT * FROM sandbox_persist.blob_get('b20/big')$$, '54000',
    'B20.1 a whole read of 10000 bytes with blob_max_read 4kB');
SELECT pg_temp.rejects($$SELECT * FROM sandbox_persist.blob_get('b20/big', 0)$$, '54000',
    'B20.2 a ranged read to the end serving 10000 bytes');
SELECT pg_temp.rejects($$SELECT * FROM sandbox_persist.blob_get('b20/big', 100, 4097)$$, '54000',
    'B20.3 a ranged read of 4097 bytes');
SELECT is(pg_temp.d(pg_temp.body('b20/big', 0, 4096)), pg_temp.d(substring(pg_temp.pat(10000) FROM 1 FOR 4096)),
    'B20.4 a ranged read of exactly 4096 bytes works');
SELECT is(pg_temp.d(pg_temp.body('b20/big', 5904)), pg_temp.d(substring(pg_temp.pat(10000) FROM 5905)),
    'B20.5 a ranged read to the end serving 4096 bytes works');
SELECT is(pg_temp.d(pg_temp.body('b20/big', 9000, 100000)), pg_temp.d(substring(pg_temp.pat(10000) FROM 9001)),
    'B20.6 a long length clamped below the limit works');
CREATE FUNCTION pg_temp.read_in_ranges(k text, step integer) RETURNS bytea LANGUAGE plpgsql AS $$
DECLARE
    size bigint := (sandbox_persist.blob_head(k)->>'size')::bigint;
    pos bigint := 0;
    acc bytea := '';
BEGIN
    WHILE pos < size LOOP
        acc := acc || (SELECT body FROM sandbox_persist.blob_get(k, pos, step));
        pos := pos + step;
    END LOOP;
    RETURN acc;
END
$$;
SELECT is(pg_temp.read_in_ranges('b20/big', 4096), pg_temp.pat(10000),
    'B20.7 successive ranged reads return the whole object');
SELECT is(pg_temp.d(pg_temp.body('b20/fits')), pg_temp.d(pg_temp.pat(4096)),
    'B20.8 a whole read of exactly blob_max_read bytes works');
SELECT is(sandbox_persist.blob_head('b20/big')->>'size', '10000',
    'B20.9 head of the large object works');
-- The default is 511MB: the former 512MB default could not send a whole read
-- of exactly that size (issue 9 defect 10), so the setting is capped below it.
RESET sandbox_persist.blob_max_read;
SELECT is(pg_temp.d(pg_temp.body('b20/big')), pg_temp.d(pg_temp.pat(10000)),
    'B20.10 with the default limit the whole read works');

------------------------------------------------------------------------------
-- B21: blob_chunk_size affects new writes only.
------------------------------------------------------------------------------
DO $$BEGIN
    PERFORM sandbox_persist.blob_put('b21/old', pg_temp.rnd(20000, 'b21old'));
    PERFORM pg_temp.keep('b21.id', to_json(sandbox_persist.blob_upload_begin('b21/streamed')));
    PERFORM sandbox_persist.blob_upload_append(pg_temp.id('b21.id'), 0,
        substring(pg_temp.rnd(30000, 'b21s') FROM 1 FOR 6000));
END$$;
SELECT is(pg_temp.nchunks('b21/old'), 5::bigint,
    'B21.1 with 4kB chunks a 20000-byte object has 5 chunks');
SET LOCAL sandbox_persist.blob_chunk_size = '16kB';
DO $$BEGIN PERFORM sandbox_persist.blob_put('b21/new', pg_temp.rnd(20000, 'b21new')); END$$;
SELECT is(pg_temp.layout('b21/new'), '0:16384:0 16384:3616:0',
    'B21.2 with 16kB chunks a new 20000-byte object has 2 chunks');
SELECT is(pg_temp.layout('b21/old'), '0:4096:0 4096:4096:0 8192:4096:0 12288:4096:0 16384:3616:0',
    'B21.3 the older object keeps its 4kB chunks');
SELECT is(pg_temp.d(pg_temp.body('b21/old')), pg_temp.d(pg_temp.rnd(20000, 'b21old')),
    'B21.4 the older object reads back exactly');
SELECT is(pg_temp.d(pg_temp.body('b21/old', 4000, 9000)), pg_temp.d(substring(pg_temp.rnd(20000, 'b21old') FROM 4001 FOR 9000)),
    'B21.5 a range across the older object''s chunk boundaries reads exactly');
SELECT is(pg_temp.d(pg_temp.body('b21/new')), pg_temp.d(pg_temp.rnd(20000, 'b21new')),
    'B21.6 the new object reads back exactly');
DO $$BEGIN PERFORM sandbox_persist.blob_upload_append(pg_temp.id('b21.id'), 6000,
        substring(pg_temp.rnd(30000, 'b21s') FROM 6001)); END$$;
SELECT is(sandbox_persist.blob_upload_commit(pg_temp.id('b21.id'))->>'size', '30000',
    'B21.7 an upload begun before the change commits with the right size');
SELECT is(pg_temp.d(pg_temp.body('b21/streamed')), pg_temp.d(pg_temp.rnd(30000, 'b21s')),
    'B21.8 and reads back exactly');
SET LOCAL sandbox_persist.blob_chunk_size = '8kB';
SELECT is(pg_temp.d(pg_temp.body('b21/old', 16000, 4000)), pg_temp.d(substring(pg_temp.rnd(20000, 'b21old') FROM 16001)),
    'B21.9 after another change the older object still reads exactly');
SELECT is(pg_temp.d(pg_temp.body('b21/new', 16000, 4000)), pg_temp.d(substring(pg_temp.rnd(20000, 'b21new') FROM 16001)),
    'B21.10 and so does the 16kB one');
SET LOCAL sandbox_persist.blob_chunk_size = '4kB';

------------------------------------------------------------------------------
-- B22: delete and overwrite leave no chunks behind.
------------------------------------------------------------------------------
DO $$BEGIN
    PERFORM sandbox_persist.blob_put('b22/obj', pg_temp.rnd(10000, 'b22'));
    PERFORM pg_temp.keep('b22.ver', to_json(pg_temp.ver('b22/obj')));
END$$;
SELECT is((SELECT count(*) FROM sandbox_persist.blob_chunks
            WHERE version = (pg_temp.got('b22.ver') #>> '{}')::bigint), 3::bigint,
    'B22.1 the object has 3 chunks');
DO $$BEGIN PERFORM sandbox_persist.blob_put('b22/obj', pg_temp.rnd(5000, 'b22b')); END$$;
SELECT is((SELECT count(*) FROM sandbox_persist.blob_chunks
            WHERE version = (pg_temp.got('b22.ver') #>> '{}')::bigint), 0::bigint,
    'B22.2 after an overwrite no chunk of the old version remains');
SELECT is(pg_temp.nchunks('b22/obj'), 2::bigint,
    'B22.3 the new version has its 2 chunks');
SELECT is(pg_temp.d(pg_temp.body('b22/obj')), pg_temp.d(pg_temp.rnd(5000, 'b22b')),
    'B22.4 the overwritten object reads the new bytes');
DO $$BEGIN PERFORM pg_temp.keep('b22.ver', to_json(pg_temp.ver('b22/obj'))); END$$;
SELECT is(sandbox_persist.blob_delete('b22/obj'), true,
    'B22.5 delete returns true');
SELECT is((SELECT count(*) FROM sandbox_persist.blob_chunks
            WHERE version = (pg_temp.got('b22.ver') #>> '{}')::bigint), 0::bigint,
    'B22.6 after delete no chunk of the object remains');
SELECT is(pg_temp.orphans(), 0::bigint,
    'B22.7 no orphan chunk rows anywhere');
DO $$BEGIN
    PERFORM sandbox_persist.blob_delete(blob_key) FROM sandbox_persist.blobs;
    PERFORM sandbox_persist.blob_upload_abort(upload_id::text) FROM sandbox_persist.blob_uploads;
END$$;
SELECT is(pg_temp.all_chunks(), 0::bigint,
    'B22.8 deleting every object and aborting every upload leaves the chunk table empty');

SELECT * FROM finish();
ROLLBACK;
