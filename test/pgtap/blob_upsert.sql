-- pgTAP: the small put's row written without SPI (docs/contract/blobs.md,
-- case B37; src/blob_upsert.c): the row, its record and the counters are
-- those the upsert statement writes, and a table this path does not know (a
-- DBA's trigger, CHECK constraint or column, row-level security, a session
-- in replica mode) is written by the statement instead.
-- Run with: pg_prove -d <db> test/pgtap/blob_upsert.sql
-- as a superuser, with sandbox_persist.allow_test_reset on for the database.
-- Chunks are 4 kB here, so "one chunk" means at most 4096 bytes.
BEGIN;
SELECT plan(37);
SELECT sandbox_persist._reset_for_tests();
SET LOCAL sandbox_persist.allow_client_clock = on;
SET LOCAL sandbox_persist.blob_chunk_size = '4kB';

-- Whether this session has prepared the upsert statement of an inline put (its plan's memory context).
CREATE FUNCTION pg_temp.statement_used() RETURNS boolean LANGUAGE sql AS $$
    SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_backend_memory_contexts
                    WHERE ident LIKE 'INSERT INTO sandbox_persist.blobs AS b (%inline_codec, inline_data)%')
$$;

-- The row of a key, every column but the sequence numbers, as text ('-' for NULL).
CREATE FUNCTION pg_temp.row_of(k text) RETURNS text LANGUAGE sql AS $$
    SELECT format('size=%s type=%s meta=%s created=%s updated=%s relied=%s replaced=%s codec=%s settled=%s bytes=%s',
                  size, coalesce(content_type, '-'), coalesce(custom_metadata::text, '-'),
                  created_at, updated_at, coalesce(relied_on_at::text, '-'),
                  replaced_version IS NOT NULL, inline_codec, gc_settled,
                  (SELECT encode(g.body, 'hex') FROM sandbox_persist.blob_get(k) g))
      FROM sandbox_persist.blobs WHERE blob_key = k
$$;

-- The counters of blobs against what the table holds: empty when they agree.
CREATE FUNCTION pg_temp.counter_drift() RETURNS SETOF text LANGUAGE sql AS $$
    WITH counted AS (SELECT counter, sum(value) AS value FROM sandbox_persist.row_counts
                      WHERE counter IN ('blobs', 'blob_raw_bytes', 'blob_stored_bytes') GROUP BY counter),
         held AS (SELECT 'blobs' AS counter, count(*) AS value FROM sandbox_persist.blobs
                  UNION ALL SELECT 'blob_raw_bytes', coalesce(sum(size), 0) FROM sandbox_persist.blobs
                  UNION ALL SELECT 'blob_stored_bytes', coalesce(sum(pg_column_size(inline_data)), 0)
                              FROM sandbox_persist.blobs)
    SELECT h.counter || ': counted ' || coalesce(c.value, 0) || ', held ' || h.value
      FROM held h LEFT JOIN counted c USING (counter)
     WHERE coalesce(c.value, 0) <> h.value
$$;

CREATE FUNCTION pg_temp.ca(b bytea) RETURNS text LANGUAGE sql AS $$
    SELECT 'sandbox-files/sha256/' || encode(sha256(b), 'hex')
$$;

-- A body that compresses badly, so its stored size is close to its length.
CREATE FUNCTION pg_temp.noise(n integer) RETURNS bytea LANGUAGE sql AS $$
    SELECT substring(string_agg(sha256(int4send(i)), ''::bytea) FROM 1 FOR n)
      FROM generate_series(1, n / 32 + 1) i
$$;

-- B37.1: a new key, then an overwrite, written without the statement.
SELECT is(sandbox_persist.blob_put('b37/a', '\x0102'::bytea, NULL, 1000)::jsonb - 'etag',
          '{"key":"b37/a","size":2,"createdAt":1000,"updatedAt":1000}'::jsonb,
          'B37.1 a new small object: its record');
SELECT is(pg_temp.row_of('b37/a'),
          'size=2 type=- meta=- created=1000 updated=1000 relied=- replaced=f codec=0 settled=f bytes=0102',
          'B37.1 a new small object: its row');
SELECT is(sandbox_persist.blob_put('b37/a', '\x030405'::bytea,
                                   '{"contentType":"text/x","customMetadata":{"k":"v"}}', 2000)::jsonb - 'etag',
          '{"key":"b37/a","size":3,"contentType":"text/x","customMetadata":{"k":"v"},"createdAt":1000,"updatedAt":2000}'::jsonb,
          'B37.1 an overwrite: its record keeps createdAt');
SELECT is(pg_temp.row_of('b37/a'),
          'size=3 type=text/x meta={"k":"v"} created=1000 updated=2000 relied=- replaced=t codec=0 settled=f bytes=030405',
          'B37.1 an overwrite: its row');
SELECT is((SELECT replaced_version < version AND etag <> '1' FROM sandbox_persist.blobs WHERE blob_key = 'b37/a'),
          true, 'B37.1 the overwrite has a new version and etag and names the one it replaced');
SELECT is(pg_temp.statement_used(), false, 'B37.1 no upsert statement was prepared for these puts');

-- B37.2: a content address put again keeps its bytes, version and etag.
SELECT is(sandbox_persist.blob_put(pg_temp.ca('\xcafe'), '\xcafe'::bytea, NULL, 3000)->>'size', '2',
          'B37.2 a content address: put');
CREATE TEMP TABLE b37_first AS
    SELECT version, etag FROM sandbox_persist.blobs WHERE blob_key = pg_temp.ca('\xcafe');
SELECT is(sandbox_persist.blob_put(pg_temp.ca('\xcafe'), '\xcafe'::bytea, '{"contentType":"a/b"}', 4000)::jsonb
              - 'key' - 'etag',
          '{"size":2,"contentType":"a/b","createdAt":3000,"updatedAt":4000}'::jsonb,
          'B37.2 the content address put again: options and time change');
SELECT is((SELECT (b.version, b.etag) = (f.version, f.etag) FROM sandbox_persist.blobs b, b37_first f
            WHERE b.blob_key = pg_temp.ca('\xcafe')), true,
          'B37.2 its version and etag are kept');
SELECT is(pg_temp.row_of(pg_temp.ca('\xcafe')),
          'size=2 type=a/b meta=- created=3000 updated=4000 relied=4000 replaced=f codec=0 settled=f bytes=cafe',
          'B37.2 its row: relied on now, bytes kept');

-- B37.3: between the layouts; the chunks an inline overwrite replaces go.
SELECT is(sandbox_persist.blob_put('b37/c', pg_temp.noise(10000), NULL, 5000)->>'size', '10000',
          'B37.3 a chunked object');
SELECT is(sandbox_persist.blob_put('b37/c', '\x09'::bytea, NULL, 6000)->>'size', '1',
          'B37.3 overwritten by a small one');
SELECT is((SELECT count(*) FROM sandbox_persist.blob_chunks), 0::bigint,
          'B37.3 the chunks it replaced are deleted');
SELECT is(pg_temp.row_of('b37/c'),
          'size=1 type=- meta=- created=5000 updated=6000 relied=- replaced=t codec=0 settled=f bytes=09',
          'B37.3 the small object''s row');
SELECT is(sandbox_persist.blob_put('b37/c', pg_temp.noise(3000), NULL, 7000)->>'size', '3000',
          'B37.3 a small object that does not compress, overwriting');
SELECT is((SELECT encode(sha256(g.body), 'hex') FROM sandbox_persist.blob_get('b37/c') g),
          encode(sha256(pg_temp.noise(3000)), 'hex'), 'B37.3 it reads back');

-- B37.4: the counters, kept by the same rules, agree with the table.
SELECT ok(sandbox_persist.blob_delete('b37/a'), 'B37.4 a delete');
SELECT is_empty('SELECT * FROM pg_temp.counter_drift()', 'B37.4 the counters agree with the table');
SELECT is(pg_temp.statement_used(), false, 'B37.4 still no upsert statement');

-- B37.5: a table this path does not know is written by the statement.
-- Row-level security (shown by the statement's plan: the table's owner is not subject to its policies).
ALTER TABLE sandbox_persist.blobs ENABLE ROW LEVEL SECURITY;
SELECT is(sandbox_persist.blob_put('b37/rls', '\x01'::bytea, NULL, 8000)->>'size', '1',
          'B37.5 with row-level security on: put');
SELECT is(pg_temp.statement_used(), true, 'B37.5 with row-level security on, the statement wrote the row');
ALTER TABLE sandbox_persist.blobs DISABLE ROW LEVEL SECURITY;
-- A trigger of a DBA's fires.
CREATE TABLE pg_temp.b37_fired (blob_key text);
GRANT INSERT ON pg_temp.b37_fired TO PUBLIC;
CREATE FUNCTION pg_temp.b37_note() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO pg_temp.b37_fired VALUES (NEW.blob_key);
    RETURN NULL;
END $$;
CREATE TRIGGER b37_note AFTER INSERT OR UPDATE ON sandbox_persist.blobs
    FOR EACH ROW EXECUTE FUNCTION pg_temp.b37_note();
SELECT ok(sandbox_persist.blob_put('b37/t', '\x01'::bytea, NULL, 9000) IS NOT NULL, 'B37.5 with a trigger: put');
SELECT ok(sandbox_persist.blob_put('b37/t', '\x0102'::bytea, NULL, 9001) IS NOT NULL, 'B37.5 with a trigger: overwrite');
SELECT results_eq('SELECT blob_key FROM pg_temp.b37_fired', $$VALUES ('b37/t'), ('b37/t')$$,
                  'B37.5 a trigger of a DBA''s fires for the insert and the overwrite');
SELECT is(pg_temp.row_of('b37/t'),
          'size=2 type=- meta=- created=9000 updated=9001 relied=- replaced=t codec=0 settled=f bytes=0102',
          'B37.5 the statement wrote the same row');
SELECT is_empty('SELECT * FROM pg_temp.counter_drift()', 'B37.5 and the same counters');
DROP TRIGGER b37_note ON sandbox_persist.blobs;
-- A CHECK constraint of a DBA's holds.
ALTER TABLE sandbox_persist.blobs ADD CONSTRAINT b37_small CHECK (size <> 3) NOT VALID;
SELECT throws_ok($$SELECT sandbox_persist.blob_put('b37/big', '\x010203'::bytea, NULL, 10000)$$, '23514',
                 'new row for relation "blobs" violates check constraint "b37_small"',
                 'B37.5 a CHECK constraint of a DBA''s refuses the row');
ALTER TABLE sandbox_persist.blobs DROP CONSTRAINT b37_small;
-- A NOT NULL of a DBA's holds (on the path without the statement too).
UPDATE sandbox_persist.blobs SET content_type = 'x/x' WHERE content_type IS NULL;
ALTER TABLE sandbox_persist.blobs ALTER COLUMN content_type SET NOT NULL;
SELECT throws_ok($$SELECT sandbox_persist.blob_put('b37/untyped', '\x01'::bytea, NULL, 10500)$$, '23502',
                 'null value in column "content_type" of relation "blobs" violates not-null constraint',
                 'B37.5 a NOT NULL of a DBA''s refuses the row');
SELECT is(sandbox_persist.blob_put('b37/typed', '\x01'::bytea, '{"contentType":"a/b"}', 10500)->>'contentType', 'a/b',
          'B37.5 and takes one that has the column');
ALTER TABLE sandbox_persist.blobs ALTER COLUMN content_type DROP NOT NULL;

-- A column of a DBA's gets its default.
ALTER TABLE sandbox_persist.blobs ADD COLUMN b37_note text DEFAULT 'dba';
SELECT ok(sandbox_persist.blob_put('b37/col', '\x01'::bytea, NULL, 11000) IS NOT NULL, 'B37.5 with a column added: put');
SELECT is((SELECT b37_note FROM sandbox_persist.blobs WHERE blob_key = 'b37/col'), 'dba',
          'B37.5 a column of a DBA''s gets its default');
ALTER TABLE sandbox_persist.blobs DROP COLUMN b37_note;
-- A session in replica mode: the counter triggers do not fire, as for any statement.
CREATE TEMP TABLE b37_counts AS SELECT counter, sum(value) AS value FROM sandbox_persist.row_counts GROUP BY counter;
SET LOCAL session_replication_role = replica;
SELECT ok(sandbox_persist.blob_put('b37/replica', '\x0102'::bytea, NULL, 12000) IS NOT NULL, 'B37.5 in replica mode: put');
SELECT results_eq('SELECT counter, sum(value) FROM sandbox_persist.row_counts GROUP BY counter ORDER BY counter',
                  'SELECT counter, value FROM b37_counts ORDER BY counter',
                  'B37.5 in replica mode the counters are not kept');
SELECT ok(sandbox_persist.blob_delete('b37/replica'), 'B37.5 in replica mode: the uncounted object deleted, uncounted');
RESET session_replication_role;
-- B37.6: with every change of a DBA's undone (a dropped column stays behind), the
-- statement-free path writes again, and the counters still agree.
SELECT is(sandbox_persist.blob_put('b37/after', '\x0a0b'::bytea, NULL, 13000)->>'size', '2',
          'B37.6 a put after the changes were undone');
SELECT is(pg_temp.row_of('b37/after'),
          'size=2 type=- meta=- created=13000 updated=13000 relied=- replaced=f codec=0 settled=f bytes=0a0b',
          'B37.6 its row');
SELECT is_empty('SELECT * FROM pg_temp.counter_drift()', 'B37.6 the counters agree with the table');

SELECT * FROM finish();
ROLLBACK;
