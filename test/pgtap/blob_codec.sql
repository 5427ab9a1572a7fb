-- pgTAP: the chunk codec (docs/contract/blobs.md §6, cases B32-B35):
-- sandbox_persist.blob_codec picks zstd or lz4 for new chunks and inline
-- objects, each row records its own codec, and objects written under either
-- setting read back whole and in every range; corrupt lz4 bytes are XX001;
-- maintain() rewrites lz4 as zstd under blob_recompress (A12, maintenance.md).
-- Run with: pg_prove -d <db> test/pgtap/blob_codec.sql
-- as a superuser, with sandbox_persist.allow_test_reset on for the database.
-- Chunks are 4 kB here, so "one chunk" means at most 4096 bytes.
BEGIN;
SELECT plan(48);
SELECT sandbox_persist._reset_for_tests();
SET LOCAL sandbox_persist.blob_chunk_size = '4kB';

\ir lib/blob_helpers.psql

-- How a key is stored: 'inline:<codec>' or the codec of each chunk in order.
CREATE FUNCTION pg_temp.codecs(k text) RETURNS text LANGUAGE sql AS $$
    SELECT coalesce('inline:' || b.inline_codec,
                    (SELECT 'chunks:' || string_agg(c.codec::text, ' ' ORDER BY c.chunk_offset)
                       FROM sandbox_persist.blob_chunks c WHERE c.version = b.version))
      FROM sandbox_persist.blobs b WHERE b.blob_key = k
$$;

-- Compressible text (lz4 and zstd both shrink it), random bytes (neither does).
CREATE FUNCTION pg_temp.text_bytes(n integer) RETURNS bytea LANGUAGE sql AS $$
    SELECT convert_to(rpad('', n, 'chunks compress with lz4 or zstd '), 'UTF8')
$$;
CREATE FUNCTION pg_temp.mixed() RETURNS bytea LANGUAGE sql AS $$
    SELECT pg_temp.text_bytes(4096) || pg_temp.rnd(4096, 'b32') || pg_temp.text_bytes(1000)
$$;

------------------------------------------------------------------------------
-- B32: with blob_codec lz4, new chunks and inline objects are lz4 (codec 2),
-- raw where lz4 does not shrink them, and read back whole and in any range.
------------------------------------------------------------------------------
SELECT is(current_setting('sandbox_persist.blob_codec'), 'zstd', 'B32.1 the default codec is zstd');
SET LOCAL sandbox_persist.blob_codec = lz4;
DO $$BEGIN PERFORM sandbox_persist.blob_put('b32/mixed', pg_temp.mixed()); END$$;
SELECT is(pg_temp.codecs('b32/mixed'), 'chunks:2 0 2',
    'B32.2 each chunk is compressed on its own: lz4, raw (random), lz4');
SELECT cmp_ok((SELECT octet_length(c.data) FROM sandbox_persist.blob_chunks c
                 JOIN sandbox_persist.blobs b ON b.version = c.version
                WHERE b.blob_key = 'b32/mixed' AND c.chunk_offset = 0), '<', 4096,
    'B32.3 the lz4 chunk is smaller than its raw length');
SELECT is(pg_temp.d(pg_temp.body('b32/mixed')), pg_temp.d(pg_temp.mixed()),
    'B32.4 the lz4 object reads back whole');
SELECT is(pg_temp.d(pg_temp.body('b32/mixed', 4000, 200)), pg_temp.d(substring(pg_temp.mixed() FROM 4001 FOR 200)),
    'B32.5 a range across an lz4 and a raw chunk');
SELECT is(pg_temp.d(pg_temp.body('b32/mixed', 8190, 10)), pg_temp.d(substring(pg_temp.mixed() FROM 8191 FOR 10)),
    'B32.6 a range across a raw and an lz4 chunk');
SELECT is(pg_temp.d(pg_temp.body('b32/mixed', 8200, 5)), pg_temp.d(substring(pg_temp.mixed() FROM 8201 FOR 5)),
    'B32.7 a range inside the last lz4 chunk');
DO $$BEGIN PERFORM sandbox_persist.blob_put('b32/inline', pg_temp.text_bytes(3000)); END$$;
SELECT is(pg_temp.codecs('b32/inline'), 'inline:2', 'B32.8 a one-chunk object is inline lz4');
SELECT is(pg_temp.d(pg_temp.body('b32/inline')) || ' / ' || pg_temp.d(pg_temp.body('b32/inline', 2990, 10)),
    pg_temp.d(pg_temp.text_bytes(3000)) || ' / ' || pg_temp.d(substring(pg_temp.text_bytes(3000) FROM 2991)),
    'B32.9 the inline lz4 object reads back whole and in a range');
DO $$BEGIN PERFORM sandbox_persist.blob_put('b32/random', pg_temp.rnd(2000, 'b32r')); END$$;
SELECT is(pg_temp.codecs('b32/random'), 'inline:0', 'B32.10 random bytes lz4 cannot shrink stay raw');
SELECT is(pg_temp.upload('b32.up', 'b32/streamed', NULL, pg_temp.mixed(), 3000)->>'size', '9192',
    'B32.11 a streamed upload under lz4 commits');
SELECT is(pg_temp.codecs('b32/streamed') || ' ' || pg_temp.d(pg_temp.body('b32/streamed')),
    'chunks:2 0 2 ' || pg_temp.d(pg_temp.mixed()),
    'B32.12 its chunks are lz4 and raw, and it reads back exactly');
DO $$BEGIN PERFORM sandbox_persist.blob_put('sandbox-files/sha256/' || encode(sha256(pg_temp.mixed()), 'hex'), pg_temp.mixed()); END$$;
SELECT is(pg_temp.d(pg_temp.body('sandbox-files/sha256/' || encode(sha256(pg_temp.mixed()), 'hex'))), pg_temp.d(pg_temp.mixed()),
    'B32.13 a content-addressed lz4 object is verified and reads back');

------------------------------------------------------------------------------
-- B33: the codec is recorded per row, so objects written under either
-- setting read alike whatever the setting is now, and an overwrite takes the
-- current codec.
------------------------------------------------------------------------------
SET LOCAL sandbox_persist.blob_codec = zstd;
DO $$BEGIN PERFORM sandbox_persist.blob_put('b33/zstd', pg_temp.mixed()); END$$;
DO $$BEGIN PERFORM sandbox_persist.blob_put('b33/zstd-inline', pg_temp.text_bytes(3000)); END$$;
SELECT is(pg_temp.codecs('b33/zstd') || ' ' || pg_temp.codecs('b33/zstd-inline'), 'chunks:1 0 1 inline:1',
    'B33.1 under zstd the same bytes are zstd chunks and a zstd inline object');
SELECT is(pg_temp.d(pg_temp.body('b32/mixed')) || ' / ' || pg_temp.d(pg_temp.body('b32/inline', 5, 7)),
    pg_temp.d(pg_temp.mixed()) || ' / ' || pg_temp.d(substring(pg_temp.text_bytes(3000) FROM 6 FOR 7)),
    'B33.2 the lz4 objects still read back under zstd');
SET LOCAL sandbox_persist.blob_codec = lz4;
SELECT is(pg_temp.d(pg_temp.body('b33/zstd')) || ' / ' || pg_temp.d(pg_temp.body('b33/zstd-inline', 5, 7)),
    pg_temp.d(pg_temp.mixed()) || ' / ' || pg_temp.d(substring(pg_temp.text_bytes(3000) FROM 6 FOR 7)),
    'B33.3 the zstd objects read back under lz4');
DO $$BEGIN PERFORM sandbox_persist.blob_put('b33/zstd', pg_temp.mixed()); END$$;
SELECT is(pg_temp.codecs('b33/zstd') || ' ' || pg_temp.d(pg_temp.body('b33/zstd')),
    'chunks:2 0 2 ' || pg_temp.d(pg_temp.mixed()), 'B33.4 an overwrite under lz4 stores lz4 chunks');
SELECT is((SELECT count(*) FROM sandbox_persist.blob_chunks c
            WHERE NOT EXISTS (SELECT 1 FROM sandbox_persist.blobs b WHERE b.version = c.version)),
    0::bigint, 'B33.5 and leaves no chunk of the zstd version behind');
SELECT throws_ok($$SET sandbox_persist.blob_codec = pglz$$, '22023', NULL,
    'B33.6 a codec other than zstd and lz4 is refused');

------------------------------------------------------------------------------
-- B34: corrupt lz4 bytes are XX001; the tables refuse an unknown codec.
------------------------------------------------------------------------------
DO $$BEGIN PERFORM sandbox_persist.blob_put('b34/chunks', pg_temp.text_bytes(12288)); END$$;
SELECT is(pg_temp.codecs('b34/chunks'), 'chunks:2 2 2', 'B34.1 the object is three lz4 chunks');
UPDATE sandbox_persist.blob_chunks SET data = '\xff00ff00ff'
 WHERE version = (SELECT version FROM sandbox_persist.blobs WHERE blob_key = 'b34/chunks') AND chunk_offset = 4096;
SELECT pg_temp.rejects($$SELECT * FROM sandbox_persist.blob_get('b34/chunks')$$, 'XX001',
    'B34.2 a whole read over a corrupt lz4 chunk', NULL, 'stored blob chunk is corrupt');
SELECT is(pg_temp.d(pg_temp.body('b34/chunks', 8192, 100)), pg_temp.d(substring(pg_temp.text_bytes(12288) FROM 8193 FOR 100)),
    'B34.3 a range over an intact lz4 chunk still reads');
DO $$BEGIN PERFORM sandbox_persist.blob_put('b34/short', pg_temp.text_bytes(8192)); END$$;
UPDATE sandbox_persist.blob_chunks SET raw_length = 5000
 WHERE version = (SELECT version FROM sandbox_persist.blobs WHERE blob_key = 'b34/short') AND chunk_offset = 4096;
SELECT pg_temp.rejects($$SELECT * FROM sandbox_persist.blob_get('b34/short', 4096)$$, 'XX001',
    'B34.4 an lz4 chunk whose raw_length is wrong');
SELECT throws_ok($$UPDATE sandbox_persist.blob_chunks SET codec = 3 WHERE chunk_offset = 0$$, '23514', NULL,
    'B34.5 the chunk table refuses an unknown codec');
------------------------------------------------------------------------------
-- B35: under blob_recompress, maintain() rewrites lz4 chunks (of objects and
-- of open uploads) and lz4 inline objects as zstd, at most max_rows per
-- call; bytes, record and etag stay; a corrupt lz4 chunk is left, with a
-- WARNING, and does not stop the round. Off (the default), nothing changes.
------------------------------------------------------------------------------
DELETE FROM sandbox_persist.blob_chunks
 WHERE version = (SELECT version FROM sandbox_persist.blobs WHERE blob_key = 'b34/short');
DELETE FROM sandbox_persist.blobs WHERE blob_key = 'b34/short';
DO $$BEGIN PERFORM sandbox_persist.blob_put('b35/chunks', pg_temp.mixed()); END$$;
DO $$BEGIN PERFORM sandbox_persist.blob_put('b35/inline', pg_temp.text_bytes(3000)); END$$;
SELECT sandbox_persist.blob_upload_begin('b35/upload') AS b35_up \gset
SELECT sandbox_persist.blob_upload_append(:'b35_up', 0, pg_temp.text_bytes(5000)) IS NOT NULL AS appended \gset
CREATE TEMP TABLE b35_before AS
    SELECT b.blob_key, sandbox_persist.blob_head(b.blob_key)::text AS head, g.body
      FROM sandbox_persist.blobs b, LATERAL sandbox_persist.blob_get(b.blob_key) g
     WHERE b.blob_key <> 'b34/chunks';
CREATE TEMP TABLE b35_sizes AS
    SELECT (SELECT sum(octet_length(c.data)) FROM sandbox_persist.blob_chunks c
              JOIN sandbox_persist.blobs b ON b.version = c.version
             WHERE b.blob_key = 'b35/chunks' AND c.codec = 2) AS b35_lz4_bytes,
           (SELECT count(*) FROM sandbox_persist.blob_chunks WHERE codec = 2)
         + (SELECT count(*) FROM sandbox_persist.blobs WHERE inline_codec = 2) AS lz4_rows;
SELECT is(current_setting('sandbox_persist.blob_recompress'), 'off', 'B35.1 blob_recompress is off by default');
SELECT is(sandbox_persist.maintain()->>'blobsRecompressed', '0', 'B35.2 off, maintain() rewrites nothing');
SELECT is((SELECT count(*) FROM sandbox_persist.blob_chunks WHERE codec = 2)
          + (SELECT count(*) FROM sandbox_persist.blobs WHERE inline_codec = 2),
    (SELECT lz4_rows FROM b35_sizes), 'B35.3 and every lz4 row is still lz4');
SET LOCAL sandbox_persist.blob_recompress = on;
SELECT is(sandbox_persist.maintain(2)->>'blobsRecompressed', '2', 'B35.4 on, maintain(2) rewrites two rows');
SELECT is((SELECT count(*) FROM sandbox_persist.blob_chunks WHERE codec = 2)
          + (SELECT count(*) FROM sandbox_persist.blobs WHERE inline_codec = 2),
    (SELECT lz4_rows FROM b35_sizes) - 2, 'B35.5 two fewer lz4 rows remain');
SELECT is((sandbox_persist.maintain()->>'blobsRecompressed')::bigint,
    (SELECT lz4_rows FROM b35_sizes) - 2 - 1, 'B35.6 the next round rewrites the rest but the corrupt chunk');
SELECT is((SELECT string_agg(format('%s:%s', c.chunk_offset, c.codec), ' ' ORDER BY c.chunk_offset)
             FROM sandbox_persist.blob_chunks c
            WHERE c.version = (SELECT version FROM sandbox_persist.blobs WHERE blob_key = 'b34/chunks')),
    '0:1 4096:2 8192:1', 'B35.7 the corrupt lz4 chunk is left as it is, its neighbours are zstd');
SELECT is(pg_temp.codecs('b35/chunks') || ' ' || pg_temp.codecs('b35/inline') || ' ' || pg_temp.codecs('b32/random'),
    'chunks:1 0 1 inline:1 inline:0', 'B35.8 lz4 chunks and inline objects are zstd now; raw rows are untouched');
SELECT is((SELECT string_agg(c.codec::text, ' ' ORDER BY c.chunk_offset) FROM sandbox_persist.blob_chunks c
             JOIN sandbox_persist.blob_uploads u ON u.version = c.version WHERE u.upload_id = :'b35_up'::uuid),
    '1', 'B35.9 the chunk an open upload staged is zstd too');
SELECT is((SELECT count(*) FROM b35_before x
             LEFT JOIN LATERAL sandbox_persist.blob_get(x.blob_key) g ON true
            WHERE g.body IS DISTINCT FROM x.body
               OR sandbox_persist.blob_head(x.blob_key)::text IS DISTINCT FROM x.head),
    0::bigint, 'B35.10 every object reads back the same bytes with the same record (etag, size, times)');
SELECT is(pg_temp.d(pg_temp.body('b35/chunks', 4090, 4200)), pg_temp.d(substring(pg_temp.mixed() FROM 4091 FOR 4200)),
    'B35.11 a range across the rewritten chunks reads back exactly');
SELECT cmp_ok((SELECT sum(octet_length(c.data)) FROM sandbox_persist.blob_chunks c
                JOIN sandbox_persist.blobs b ON b.version = c.version WHERE b.blob_key = 'b35/chunks' AND c.codec = 1),
    '<', (SELECT b35_lz4_bytes FROM b35_sizes),
    'B35.12 its zstd chunks take fewer bytes than its lz4 chunks did');
SELECT is(sandbox_persist.maintain()->>'blobsRecompressed', '0', 'B35.13 a further round finds nothing to rewrite');
SELECT is((SELECT sandbox_persist.blob_upload_append(:'b35_up', 5000, pg_temp.text_bytes(100))->>'received'),
    '5100', 'B35.14 the upload goes on after its staged chunk was rewritten');
SELECT is((sandbox_persist.blob_upload_commit(:'b35_up'))->>'size', '5100', 'B35.15 and commits');
SELECT is(pg_temp.d(pg_temp.body('b35/upload')),
    pg_temp.d(pg_temp.text_bytes(5000) || pg_temp.text_bytes(100)), 'B35.16 with exactly its bytes');
SET LOCAL sandbox_persist.blob_codec = zstd;
SELECT is(sandbox_persist.maintain()->>'blobsRecompressed', '1', 'B35.17 the lz4 tail chunk the commit wrote is rewritten next round');
SET LOCAL sandbox_persist.blob_codec = lz4;
DO $$BEGIN PERFORM sandbox_persist.blob_put('b35/huge', pg_temp.text_bytes(5000)); END$$;
UPDATE sandbox_persist.blob_chunks SET raw_length = 2000000000
 WHERE version = (SELECT version FROM sandbox_persist.blobs WHERE blob_key = 'b35/huge') AND chunk_offset = 0;
SELECT is(sandbox_persist.maintain()->>'blobsRecompressed', '1',
    'B35.18 a chunk claiming 2000000000 raw bytes is skipped before anything is allocated, and the round goes on');
SELECT is(pg_temp.codecs('b35/huge'), 'chunks:2 1', 'B35.19 it stays lz4, its neighbour is zstd');
SELECT pg_temp.rejects($$SELECT * FROM sandbox_persist.blob_get('b35/huge')$$, 'XX001',
    'B35.20 a read of that chunk is corruption, refused before the claimed length is allocated');

SELECT * FROM finish();
ROLLBACK;
