-- pgTAP: small blobs stored inline in their blobs row (docs/contract/blobs.md
-- §6.4, cases B24-B31): which objects go inline, reads and ranges of them,
-- overwrites between the inline and the chunked layout, content addressing,
-- uploads, delete, maintenance GC, overview and corruption.
-- Run with: pg_prove -d <db> test/pgtap/blob_inline.sql
-- as a superuser, with sandbox_persist.allow_test_reset on for the database.
-- Chunks are 4 kB here, so "one chunk" means at most 4096 bytes.
BEGIN;
SELECT plan(77);
SELECT sandbox_persist._reset_for_tests();
SET LOCAL sandbox_persist.allow_client_clock = on;
SET LOCAL sandbox_persist.blob_chunk_size = '4kB';

\ir lib/blob_helpers.psql

-- How a key is stored: 'inline:<codec>' with no chunk row, 'chunks:<n>', or 'absent'.
CREATE FUNCTION pg_temp.how(k text) RETURNS text LANGUAGE sql AS $$
    SELECT coalesce((
        SELECT CASE WHEN b.inline_codec IS NOT NULL
                    THEN 'inline:' || b.inline_codec
                         || CASE WHEN EXISTS (SELECT 1 FROM sandbox_persist.blob_chunks c
                                               WHERE c.version = b.version)
                                 THEN ' with chunk rows' ELSE '' END
                    ELSE 'chunks:' || (SELECT count(*) FROM sandbox_persist.blob_chunks c
                                        WHERE c.version = b.version) END
        FROM sandbox_persist.blobs b WHERE b.blob_key = k), 'absent')
$$;

-- Chunk rows of a version no object and no open upload points at.
CREATE FUNCTION pg_temp.orphans() RETURNS bigint LANGUAGE sql AS $$
    SELECT count(*) FROM sandbox_persist.blob_chunks c
     WHERE NOT EXISTS (SELECT 1 FROM sandbox_persist.blobs b WHERE b.version = c.version)
       AND NOT EXISTS (SELECT 1 FROM sandbox_persist.blob_uploads u WHERE u.version = c.version)
$$;

CREATE FUNCTION pg_temp.ca(b bytea) RETURNS text LANGUAGE sql AS $$
    SELECT 'sandbox-files/sha256/' || encode(sha256(b), 'hex')
$$;

CREATE FUNCTION pg_temp.text_bytes(n integer) RETURNS bytea LANGUAGE sql AS $$
    SELECT convert_to(rpad('', n, 'inline text compresses well '), 'UTF8')
$$;

------------------------------------------------------------------------------
-- B24: a non-empty object of at most one chunk is stored inline, compressed
-- like a chunk, and reads back whole and in any range.
------------------------------------------------------------------------------
SELECT is(current_setting('sandbox_persist.blob_inline_max'), '256kB',
    'B24.1 blob_inline_max defaults to 256kB (one default chunk)');
DO $$BEGIN PERFORM sandbox_persist.blob_put('b24/text', pg_temp.text_bytes(4096)); END$$;
SELECT is(pg_temp.how('b24/text'), 'inline:1', 'B24.2 a compressible 4096-byte object is inline, zstd, with no chunk row');
SELECT cmp_ok((SELECT octet_length(inline_data) FROM sandbox_persist.blobs WHERE blob_key = 'b24/text'), '<', 4096,
    'B24.3 its stored bytes are smaller than the object');
DO $$BEGIN PERFORM sandbox_persist.blob_put('b24/random', pg_temp.rnd(3000, 'b24')); END$$;
SELECT is(pg_temp.how('b24/random'), 'inline:0', 'B24.4 a random object is inline and raw');
SELECT is((SELECT inline_data FROM sandbox_persist.blobs WHERE blob_key = 'b24/random'), pg_temp.rnd(3000, 'b24'),
    'B24.5 a raw inline object holds the bytes as they are');
DO $$BEGIN PERFORM sandbox_persist.blob_put('b24/two', '\x0102'); END$$;
SELECT is(pg_temp.how('b24/two'), 'inline:0', 'B24.6 a 2-byte object is inline');
SELECT is(pg_temp.d(pg_temp.body('b24/text')), pg_temp.d(pg_temp.text_bytes(4096)), 'B24.7 whole read of a zstd inline object');
SELECT is(pg_temp.d(pg_temp.body('b24/random')), pg_temp.d(pg_temp.rnd(3000, 'b24')), 'B24.8 whole read of a raw inline object');
SELECT is(pg_temp.body('b24/two'), '\x0102'::bytea, 'B24.9 whole read of a 2-byte object');
SELECT is(pg_temp.d(pg_temp.body('b24/text', 1000, 500)), pg_temp.d(substring(pg_temp.text_bytes(4096) FROM 1001 FOR 500)),
    'B24.10 a range inside a zstd inline object');
SELECT is(pg_temp.d(pg_temp.body('b24/random', 2500, 400)), pg_temp.d(substring(pg_temp.rnd(3000, 'b24') FROM 2501 FOR 400)),
    'B24.11 a range inside a raw inline object');
SELECT is(pg_temp.d(pg_temp.body('b24/random', 2999)), pg_temp.d(substring(pg_temp.rnd(3000, 'b24') FROM 3000)),
    'B24.12 only the last byte');
SELECT is(pg_temp.d(pg_temp.body('b24/text', 4000, 1000)), pg_temp.d(substring(pg_temp.text_bytes(4096) FROM 4001)),
    'B24.13 a long length is clamped');
SELECT is((SELECT record->'range' FROM sandbox_persist.blob_get('b24/text', 4000, 1000))::text,
    '{"offset":4000,"length":96}', 'B24.14 the record reports the served range');
SELECT is(pg_temp.d(pg_temp.body('b24/text', 10, 0)), pg_temp.d(''::bytea), 'B24.15 a zero-length range serves nothing');
SELECT pg_temp.rejects($$SELECT * FROM sandbox_persist.blob_get('b24/two', 2)$$, '22003',
    'B24.16 an offset equal to the size of an inline object',
    'Blob range offset 2 is outside the object (size 2).');
SELECT is((SELECT record::jsonb - 'etag' - 'createdAt' - 'updatedAt' FROM sandbox_persist.blob_get('b24/random')),
    '{"key":"b24/random","size":3000}'::jsonb, 'B24.17 the record of an inline object is the usual one');
SELECT is((sandbox_persist.blob_head('b24/random')::jsonb)->>'size', '3000', 'B24.18 head of an inline object');
SELECT is((SELECT string_agg(o->>'key' || ':' || (o->>'size'), ',') FROM json_array_elements(sandbox_persist.blob_list('b24/')->'objects') o),
    'b24/random:3000,b24/text:4096,b24/two:2', 'B24.19 list shows inline objects with their sizes');

------------------------------------------------------------------------------
-- B25: what stays chunked: more than one chunk, above blob_inline_max, empty;
-- blob_inline_max 0 turns inlining off.
------------------------------------------------------------------------------
DO $$BEGIN PERFORM sandbox_persist.blob_put('b25/4097', pg_temp.pat(4097)); END$$;
SELECT is(pg_temp.how('b25/4097'), 'chunks:2', 'B25.1 one byte over a chunk is stored in two chunks');
SELECT is(pg_temp.d(pg_temp.body('b25/4097')), pg_temp.d(pg_temp.pat(4097)), 'B25.2 and reads back');
DO $$BEGIN PERFORM sandbox_persist.blob_put('b25/empty', ''::bytea); END$$;
SELECT is(pg_temp.how('b25/empty'), 'chunks:0', 'B25.3 an empty object has neither chunks nor inline bytes');
SELECT is(pg_temp.body('b25/empty'), ''::bytea, 'B25.4 and reads back empty');
SET LOCAL sandbox_persist.blob_inline_max = 1000;
DO $$BEGIN PERFORM sandbox_persist.blob_put('b25/1001', pg_temp.pat(1001)); END$$;
DO $$BEGIN PERFORM sandbox_persist.blob_put('b25/1000', pg_temp.pat(1000)); END$$;
SELECT is(pg_temp.how('b25/1001') || ' ' || pg_temp.how('b25/1000'), 'chunks:1 inline:1',
    'B25.5 with blob_inline_max 1000: 1001 bytes is a chunk, 1000 bytes inline');
SET LOCAL sandbox_persist.blob_inline_max = 0;
DO $$BEGIN PERFORM sandbox_persist.blob_put('b25/off', '\x01'); END$$;
SELECT is(pg_temp.how('b25/off'), 'chunks:1', 'B25.6 with blob_inline_max 0 even one byte is a chunk');
RESET sandbox_persist.blob_inline_max;
SELECT is(pg_temp.d(pg_temp.body('b25/1001', 1000)) || ' ' || pg_temp.d(pg_temp.body('b25/1000', 999)),
    pg_temp.d(substring(pg_temp.pat(1001) FROM 1001)) || ' ' || pg_temp.d(substring(pg_temp.pat(1000) FROM 1000)),
    'B25.7 both layouts read back side by side');

------------------------------------------------------------------------------
-- B26: overwrites between the layouts leave exactly the new layout.
------------------------------------------------------------------------------
DO $$BEGIN PERFORM pg_temp.keep('b26.first', sandbox_persist.blob_put('b26/obj', pg_temp.pat(100), '{"contentType":"text/a"}', 1000)); END$$;
SELECT is(pg_temp.how('b26/obj'), 'inline:0', 'B26.1 the first object (100 bytes zstd cannot shrink) is inline, raw');
DO $$BEGIN PERFORM pg_temp.keep('b26.big', sandbox_persist.blob_put('b26/obj', pg_temp.rnd(10000, 'b26'), NULL, 2000)); END$$;
SELECT is(pg_temp.how('b26/obj'), 'chunks:3', 'B26.2 overwritten by 10000 bytes: three chunks');
SELECT ok((SELECT inline_codec IS NULL AND inline_data IS NULL FROM sandbox_persist.blobs WHERE blob_key = 'b26/obj'),
    'B26.3 the inline bytes are gone');
SELECT is(pg_temp.d(pg_temp.body('b26/obj')), pg_temp.d(pg_temp.rnd(10000, 'b26')), 'B26.4 the chunked object reads back');
SELECT is((pg_temp.got('b26.big')->>'createdAt') || ' ' || (pg_temp.got('b26.big')->>'etag' <> pg_temp.got('b26.first')->>'etag'),
    '1000 true', 'B26.5 createdAt kept, new etag');
SELECT version AS v FROM sandbox_persist.blobs WHERE blob_key = 'b26/obj' \gset
DO $$BEGIN PERFORM pg_temp.keep('b26.small', sandbox_persist.blob_put('b26/obj', '\x616263', NULL, 3000)); END$$;
SELECT is(pg_temp.how('b26/obj'), 'inline:0', 'B26.6 overwritten by 3 bytes: inline again');
SELECT is((SELECT count(*) FROM sandbox_persist.blob_chunks WHERE version = :v), 0::bigint,
    'B26.7 the chunks of the replaced version are deleted');
SELECT is(pg_temp.body('b26/obj'), '\x616263'::bytea, 'B26.8 the inline object reads back');
SELECT is((pg_temp.got('b26.small')->>'createdAt') || ' ' || (pg_temp.got('b26.small')->>'size'), '1000 3',
    'B26.9 createdAt still kept, size 3');
DO $$BEGIN PERFORM sandbox_persist.blob_put('b26/obj', pg_temp.text_bytes(4000), NULL, 4000); END$$;
SELECT is(pg_temp.how('b26/obj') || ' ' || pg_temp.d(pg_temp.body('b26/obj', 3990)),
    'inline:1 ' || pg_temp.d(substring(pg_temp.text_bytes(4000) FROM 3991)), 'B26.10 inline over inline');
DO $$BEGIN PERFORM sandbox_persist.blob_put('b26/obj', ''::bytea, NULL, 5000); END$$;
SELECT is(pg_temp.how('b26/obj') || ' ' || pg_temp.d(pg_temp.body('b26/obj')), 'chunks:0 0 bytes, md5 d41d8cd98f00b204e9800998ecf8427e',
    'B26.11 inline overwritten by an empty object: no bytes kept anywhere');
SELECT is(pg_temp.orphans(), 0::bigint, 'B26.12 no chunk row is orphaned');

------------------------------------------------------------------------------
-- B27: content-addressed inline objects.
------------------------------------------------------------------------------
SELECT pg_temp.ca('b27 content'::bytea) AS k27 \gset
DO $$BEGIN PERFORM pg_temp.keep('b27.first', sandbox_persist.blob_put(pg_temp.ca('b27 content'::bytea), 'b27 content'::bytea, '{"contentType":"text/x"}', 1000)); END$$;
SELECT is(pg_temp.how(:'k27'), 'inline:0', 'B27.1 a small content-addressed object is inline');
SELECT is(sandbox_persist.blob_put(:'k27', 'b27 content'::bytea, NULL, 5000)::jsonb - 'updatedAt',
    pg_temp.got('b27.first')::jsonb - 'updatedAt' - 'contentType',
    'B27.2 a second put keeps etag and createdAt, replaces the options');
SELECT is((SELECT relied_on_at FROM sandbox_persist.blobs WHERE blob_key = :'k27'), 5000::bigint,
    'B27.3 and moves the GC time');
SELECT is(pg_temp.how(:'k27') || ' ' || pg_temp.body(:'k27')::text, 'inline:0 ' || 'b27 content'::bytea::text,
    'B27.4 the bytes are untouched');
SELECT pg_temp.rejects(format('SELECT sandbox_persist.blob_put(%L, %L::bytea)', pg_temp.ca('other'::bytea), 'not other'::bytea),
    'SP301', 'B27.5 an inline-sized body that does not hash to its key');
SELECT is(pg_temp.how(pg_temp.ca('other'::bytea)), 'absent', 'B27.6 nothing is stored for it');
-- a content address stored in chunks before stays chunked when put again small-enough
SET LOCAL sandbox_persist.blob_inline_max = 0;
DO $$BEGIN PERFORM pg_temp.keep('b27.c1', sandbox_persist.blob_put(pg_temp.ca('b27 chunked'::bytea), 'b27 chunked'::bytea, NULL, 1000)); END$$;
RESET sandbox_persist.blob_inline_max;
SELECT is(sandbox_persist.blob_put(pg_temp.ca('b27 chunked'::bytea), 'b27 chunked'::bytea, NULL, 2000)->>'etag',
    pg_temp.got('b27.c1')->>'etag', 'B27.7 a put of a chunked content address keeps its etag');
SELECT is(pg_temp.how(pg_temp.ca('b27 chunked'::bytea)), 'chunks:1', 'B27.8 and its chunk; no inline copy is made');

------------------------------------------------------------------------------
-- B28: uploads stay chunked and replace an inline object; delete.
------------------------------------------------------------------------------
DO $$BEGIN PERFORM sandbox_persist.blob_put('b28/obj', '\x6f6c64'); END$$;
SELECT sandbox_persist.blob_upload_begin('b28/obj') AS up28 \gset
SELECT is(sandbox_persist.blob_upload_append(:'up28', 0, '\x6e6577')::text, '{"received":3}', 'B28.1 an append of 3 bytes');
SELECT is(pg_temp.body('b28/obj'), '\x6f6c64'::bytea, 'B28.2 before commit the inline object is served');
SELECT is(sandbox_persist.blob_upload_commit(:'up28')->>'size', '3', 'B28.3 commit');
SELECT is(pg_temp.how('b28/obj') || ' ' || pg_temp.body('b28/obj')::text, 'chunks:1 \x6e6577',
    'B28.4 the committed upload is a chunk and the inline bytes are gone');
DO $$BEGIN PERFORM sandbox_persist.blob_put('b28/obj', '\x6f6c64'); END$$;
SELECT ok(sandbox_persist.blob_delete('b28/obj'), 'B28.5 delete of an inline object');
SELECT is(pg_temp.how('b28/obj') || ' ' || coalesce(pg_temp.body('b28/obj')::text, 'no row'), 'absent no row',
    'B28.6 leaves no row and no bytes');
SELECT is(pg_temp.orphans(), 0::bigint, 'B28.7 no chunk row is orphaned');

------------------------------------------------------------------------------
-- B29: maintenance collects inline content-addressed objects; overview.
------------------------------------------------------------------------------
SELECT sandbox_persist._reset_for_tests();
DO $$BEGIN PERFORM sandbox_persist.blob_put(pg_temp.ca('b29 old'::bytea), 'b29 old'::bytea, NULL, 1000); END$$;
DO $$BEGIN PERFORM sandbox_persist.blob_put(pg_temp.ca(pg_temp.text_bytes(3000)), pg_temp.text_bytes(3000), NULL, 1000); END$$;
DO $$BEGIN PERFORM sandbox_persist.blob_put('b29/app', 'b29 app'::bytea, NULL, 1000); END$$;
SELECT is((SELECT blob_stored_bytes FROM sandbox_persist.overview)::bigint,
    (SELECT sum(pg_column_size(inline_data)) FROM sandbox_persist.blobs)::bigint,
    'B29.1 overview.blob_stored_bytes counts the inline bytes');
SELECT is((sandbox_persist.maintain(1000, 1000 + 49 * 3600000)->>'blobsDeleted')::int, 2,
    'B29.2 maintain deletes both unreferenced inline content-addressed blobs past the grace');
SELECT is((SELECT string_agg(blob_key, ',') FROM sandbox_persist.blobs), 'b29/app',
    'B29.3 only the application key is left');
SELECT is((SELECT count(*) FROM sandbox_persist.blob_chunks), 0::bigint, 'B29.4 and no chunk row');

------------------------------------------------------------------------------
-- B30: a corrupt inline object is XX001 (the row checks keep codec and bytes together).
------------------------------------------------------------------------------
DO $$BEGIN PERFORM sandbox_persist.blob_put('b30/zstd', pg_temp.text_bytes(4000)); END$$;
DO $$BEGIN PERFORM sandbox_persist.blob_put('b30/raw', pg_temp.rnd(2000, 'b30')); END$$;
UPDATE sandbox_persist.blobs SET inline_data = '\x0000000000' WHERE blob_key = 'b30/zstd';
UPDATE sandbox_persist.blobs SET inline_data = substring(inline_data FROM 1 FOR 1000) WHERE blob_key = 'b30/raw';
SELECT pg_temp.rejects($$SELECT * FROM sandbox_persist.blob_get('b30/zstd')$$, 'XX001', 'B30.1 a whole read of a corrupt zstd inline object');
SELECT pg_temp.rejects($$SELECT * FROM sandbox_persist.blob_get('b30/zstd', 10, 10)$$, 'XX001', 'B30.2 a ranged read of it');
SELECT pg_temp.rejects($$SELECT * FROM sandbox_persist.blob_get('b30/raw', 0, 1)$$, 'XX001', 'B30.3 a ranged read of a truncated raw inline object');
SELECT throws_ok($$UPDATE sandbox_persist.blobs SET inline_codec = NULL WHERE blob_key = 'b30/raw'$$, '23514', NULL,
    'B30.4 inline bytes without a codec are refused by the table');
SELECT throws_ok($$UPDATE sandbox_persist.blobs SET inline_codec = 3 WHERE blob_key = 'b30/raw'$$, '23514', NULL,
    'B30.5 an unknown inline codec is refused by the table');

------------------------------------------------------------------------------
-- B31: a whole read larger than work_mem (the result row is kept in memory,
-- not spilled to a temporary file) returns every byte, chunked or inline.
------------------------------------------------------------------------------
SET LOCAL work_mem = '64kB';
DO $$BEGIN PERFORM sandbox_persist.blob_put('b31/big', pg_temp.rnd(300000, 'b31')); END$$;
SELECT is(pg_temp.d(pg_temp.body('b31/big')), pg_temp.d(pg_temp.rnd(300000, 'b31')),
    'B31.1 a 300000-byte whole read with work_mem 64kB');
SELECT is(pg_temp.d((SELECT g.body FROM generate_series(1, 2) i, LATERAL sandbox_persist.blob_get('b31/big') g WHERE i = 2)),
    pg_temp.d(pg_temp.rnd(300000, 'b31')), 'B31.2 the same read repeated in one statement (a fresh result each call)');
SET LOCAL sandbox_persist.blob_chunk_size = '256kB';
DO $$BEGIN PERFORM sandbox_persist.blob_put('b31/inline', pg_temp.text_bytes(200000)); END$$;
SELECT is(pg_temp.how('b31/inline') || ' ' || pg_temp.d(pg_temp.body('b31/inline')),
    'inline:1 ' || pg_temp.d(pg_temp.text_bytes(200000)), 'B31.3 a 200000-byte inline object read whole with work_mem 64kB');
-- A read of 32 MiB or more is decoded straight into the result row (an
-- expanded datum the tuplestore flattens); a smaller one is built first.
-- 33 one-MiB blocks, each led by its number, so a misplaced block shows.
SET LOCAL sandbox_persist.blob_chunk_size = '1MB';
CREATE TEMP TABLE b31_huge AS
SELECT string_agg(int4send(i) || r, ''::bytea ORDER BY i) AS b
FROM generate_series(1, 33) i, (SELECT pg_temp.rnd(1048576, 'b31h') AS r) s;
DO $$BEGIN PERFORM sandbox_persist.blob_put('b31/huge', (SELECT b FROM b31_huge)); END$$;
SELECT is((SELECT pg_temp.d(g.body) || ' ' || (g.record->>'size') FROM sandbox_persist.blob_get('b31/huge') g),
    (SELECT pg_temp.d(b) || ' ' || octet_length(b) FROM b31_huge),
    'B31.4 a whole read of 33 MiB, decoded straight into the result row, returns every byte');
SELECT is((SELECT pg_temp.d(g.body) || ' ' || (g.record->'range')::text
             FROM sandbox_persist.blob_get('b31/huge', 12345, 33554433) g),
    (SELECT pg_temp.d(substring(b FROM 12346 FOR 33554433)) FROM b31_huge) || ' {"offset":12345,"length":33554433}',
    'B31.5 a ranged read of 32 MiB + 1 byte across chunk boundaries is exact');
SELECT is((SELECT pg_temp.d(g.body) FROM sandbox_persist.blob_get('b31/huge', 7, 33554431) g),
    (SELECT pg_temp.d(substring(b FROM 8 FOR 33554431)) FROM b31_huge),
    'B31.6 a ranged read of 32 MiB - 1 byte (built first) is exact');
SELECT is((SELECT string_agg(pg_temp.d(g.body), ' ') FROM generate_series(1, 2) i,
                  LATERAL sandbox_persist.blob_get('b31/huge', i, 33554432) g),
    (SELECT pg_temp.d(substring(b FROM 2 FOR 33554432)) || ' ' || pg_temp.d(substring(b FROM 3 FOR 33554432)) FROM b31_huge),
    'B31.7 two large reads in one statement each get their own bytes');
UPDATE sandbox_persist.blob_chunks SET data = '\x0000000000'
 WHERE version = (SELECT version FROM sandbox_persist.blobs WHERE blob_key = 'b31/huge')
   AND chunk_offset = 20 * 1048576;
SELECT pg_temp.rejects($$SELECT * FROM sandbox_persist.blob_get('b31/huge')$$, 'XX001',
    'B31.8 a corrupt chunk inside a 33 MiB whole read');
RESET work_mem;

SELECT * FROM finish();
ROLLBACK;
