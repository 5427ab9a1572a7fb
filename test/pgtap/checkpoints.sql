-- pgTAP: checkpoint store (docs/contract/checkpoint-store.md §1-§6,
-- docs/contract/README.md §4).
-- Cases: C1-C7 and C12-C18 (upstream checkpoint store suite; C8-C11 are in
-- checkpoint_validation.sql), R14, R15, R16, R36, S2, S16, S18, the opaque
-- conversation parts of V13/V14, and two storage properties with no case ID
-- (docs/contract/checkpoint-store.md §6): message text round-trips
-- byte-exactly, and each distinct message is stored once.
-- Run with: pg_prove -d <db> test/pgtap/checkpoints.sql
-- (needs sandbox_persist.allow_test_reset and allow_client_clock on).
BEGIN;
SELECT plan(168);
SELECT sandbox_persist._reset_for_tests();
SET sandbox_persist.allow_client_clock = on;

------------------------------------------------------------------------------
-- Helpers (temporary, gone at ROLLBACK).
------------------------------------------------------------------------------

-- The upstream suite's "one writer per thread, acquired on first use and
-- never released": the whole acquire result, cached per thread.
CREATE TEMP TABLE writers (thread_id text PRIMARY KEY, writer json NOT NULL);

-- A fresh, empty store (the upstream factory is called per case).
CREATE FUNCTION pg_temp.reset() RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    PERFORM sandbox_persist._reset_for_tests();
    DELETE FROM pg_temp.writers;
END
$$;

\ir lib/checkpoint_helpers.psql

-- The SQLSTATE and code name of a contract error (docs/contract/README.md §4.2).
CREATE FUNCTION pg_temp.e(name text) RETURNS text LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE name
        WHEN 'STALE_HEAD' THEN 'SP001' WHEN 'PARENT_MISMATCH' THEN 'SP002'
        WHEN 'DUPLICATE_ID' THEN 'SP003' WHEN 'NOT_HEAD' THEN 'SP004'
        WHEN 'WRITER_CONFLICT' THEN 'SP005' WHEN 'WRITER_LOST' THEN 'SP006'
        WHEN 'INVALID_ID' THEN 'SP007' WHEN 'INVALID_ENTRY' THEN 'SP008'
    END || ' SANDBOX_SNAPSHOT_' || name
$$;

-- Everything a caller can read about the two test threads, plus the lease
-- rows and the stored message count: equal values mean nothing changed.
CREATE FUNCTION pg_temp.state() RETURNS text LANGUAGE sql AS $$
    SELECT concat_ws(E'\n',
        (SELECT string_agg(format('%s head=%s list=%s', t,
                                  coalesce(sandbox_persist.checkpoint_get_head(t), '<null>'),
                                  sandbox_persist.checkpoint_list(t)), E'\n' ORDER BY t)
           FROM unnest(ARRAY['thread-a', 'thread-b']) AS t),
        'refs=' || sandbox_persist.checkpoint_list_blob_references()::text,
        'leases=' || coalesce((SELECT string_agg(r::text, ';' ORDER BY r.thread_id)
                                 FROM sandbox_persist.checkpoint_threads r), ''),
        'positions=' || (SELECT coalesce(sum(message_count), 0) FROM sandbox_persist.conversation_blocks))
$$;

-- A call that must fail: its code, then that nothing changed.
CREATE FUNCTION pg_temp.rejects(stmt text, expected text, descr text)
RETURNS SETOF text LANGUAGE plpgsql AS $$
DECLARE
    before text := pg_temp.state();
BEGIN
    RETURN NEXT is(pg_temp.sp(stmt), expected, descr || ' -> ' || expected);
    RETURN NEXT is(pg_temp.state(), before, descr || ': head, list, references unchanged');
END
$$;

-- Fixture of the upstream suite: createdAt = the id's digits (or 1), one file
-- <id>.txt whose 64-hex key is derived from the same digits, size 1.
CREATE FUNCTION pg_temp.digits(id text) RETURNS text LANGUAGE sql IMMUTABLE AS $$
    SELECT coalesce(nullif(regexp_replace(id, '[^0-9]', '', 'g'), ''), '1')
$$;
CREATE FUNCTION pg_temp.fkey(seed text) RETURNS text LANGUAGE sql IMMUTABLE AS $$
    SELECT 'sandbox-files/sha256/' || lpad(seed, 64, '0')
$$;
CREATE FUNCTION pg_temp.cp(id text, parent text DEFAULT NULL, thread text DEFAULT 'thread-a',
                           created numeric DEFAULT NULL, files jsonb DEFAULT NULL)
RETURNS jsonb LANGUAGE sql IMMUTABLE AS $$
    SELECT jsonb_build_object(
        'id', id, 'threadId', thread, 'parentCheckpointId', parent,
        'createdAt', coalesce(created, pg_temp.digits(id)::numeric),
        'reason', 'automatic',
        'files', coalesce(files, jsonb_build_array(jsonb_build_object(
            'path', id || '.txt', 'kind', 'file',
            'blobKey', pg_temp.fkey(pg_temp.digits(id)), 'size', 1))),
        'artifacts', '[]'::jsonb)
$$;
-- The fixture conversation [{role: user, content: id}].
CREATE FUNCTION pg_temp.conv(id text) RETURNS json LANGUAGE sql IMMUTABLE AS $$
    SELECT json_build_array(json_build_object('role', 'user', 'content', id))
$$;
-- The record get/list must return for a fixture checkpoint.
CREATE FUNCTION pg_temp.rec(cp jsonb) RETURNS jsonb LANGUAGE sql IMMUTABLE AS $$
    SELECT cp || jsonb_build_object('conversation', pg_temp.conv(cp->>'id')::jsonb)
$$;
-- The append input {checkpoint, expectedHeadId, writer}.
CREATE FUNCTION pg_temp.input(cp jsonb, expected text, writer json) RETURNS json
LANGUAGE sql IMMUTABLE AS $$
    SELECT json_build_object('checkpoint', cp::json, 'expectedHeadId', expected, 'writer', writer)
$$;
-- Append a fixture checkpoint with the thread's cached writer.
CREATE FUNCTION pg_temp.app(cp jsonb, expected text, now_ms bigint DEFAULT NULL,
                            writer json DEFAULT NULL) RETURNS json LANGUAGE sql AS $$
    SELECT sandbox_persist.checkpoint_append(
        pg_temp.input(cp, expected, coalesce(writer, pg_temp.w(cp->>'threadId'))),
        pg_temp.conv(cp->>'id'), now_ms)
$$;
-- The same call as SQL text, for pg_temp.sp (the writer is resolved now).
CREATE FUNCTION pg_temp.q_app(cp jsonb, expected text, now_ms bigint DEFAULT NULL,
                              writer json DEFAULT NULL) RETURNS text LANGUAGE sql AS $$
    SELECT format('SELECT sandbox_persist.checkpoint_append(%L::json, %L::json, %L::bigint)',
                  pg_temp.input(cp, expected, coalesce(writer, pg_temp.w(cp->>'threadId'))),
                  pg_temp.conv(cp->>'id'), now_ms)
$$;
CREATE FUNCTION pg_temp.del_input(thread text, id text, writer json) RETURNS json
LANGUAGE sql IMMUTABLE AS $$
    SELECT json_build_object('threadId', thread, 'checkpointId', id, 'writer', writer)
$$;
CREATE FUNCTION pg_temp.q_del(thread text, id text, writer json, now_ms bigint DEFAULT NULL)
RETURNS text LANGUAGE sql AS $$
    SELECT format('SELECT sandbox_persist.checkpoint_delete_head(%L::json, %L::bigint)',
                  pg_temp.del_input(thread, id, writer), now_ms)
$$;
CREATE FUNCTION pg_temp.q_renew(writer json, now_ms bigint DEFAULT NULL) RETURNS text
LANGUAGE sql AS $$
    SELECT format('SELECT sandbox_persist.checkpoint_renew_writer(%L::json, NULL, %L::bigint)',
                  writer, now_ms)
$$;
CREATE FUNCTION pg_temp.q_acquire(thread text, now_ms bigint DEFAULT NULL) RETURNS text
LANGUAGE sql AS $$
    SELECT format('SELECT sandbox_persist.checkpoint_acquire_writer(%L::text, NULL, %L::bigint)',
                  thread, now_ms)
$$;
-- Ids of a list result, in order.
CREATE FUNCTION pg_temp.ids(j json) RETURNS text[] LANGUAGE sql IMMUTABLE AS $$
    SELECT coalesce((SELECT array_agg(e->>'id' ORDER BY n)
                     FROM json_array_elements(j) WITH ORDINALITY AS t(e, n)), '{}')
$$;
-- listBlobReferences as {key: references}-ordered pairs.
CREATE FUNCTION pg_temp.refs(VARIADIC pairs text[] DEFAULT '{}') RETURNS jsonb
LANGUAGE sql IMMUTABLE AS $$
    SELECT coalesce(jsonb_agg(jsonb_build_object('key', pairs[2 * i - 1],
                                                 'references', pairs[2 * i]::int) ORDER BY i), '[]')
    FROM generate_series(1, coalesce(array_length(pairs, 1), 0) / 2) AS i
$$;
-- A member of a JSON object, as its exact text. PostgreSQL's -> de-escapes
-- every string of the document on the way and fails on \u0000 and lone
-- surrogates, so "\u" is hidden as "\\u" (an escaped backslash) around the
-- lookup. Exact for documents without an escaped backslash before a "u".
CREATE FUNCTION pg_temp.field(j json, key text) RETURNS json LANGUAGE sql IMMUTABLE AS $$
    SELECT replace((replace(j::text, '\u', '\\u')::json -> key)::text, '\\u', '\u')::json
$$;
-- Element i (1-based) of a JSON array, as its exact text (no de-escaping).
CREATE FUNCTION pg_temp.nth(j json, i int) RETURNS json LANGUAGE sql IMMUTABLE AS $$
    SELECT e FROM json_array_elements(j) WITH ORDINALITY AS t(e, n) WHERE n = i
$$;
-- Element texts of a JSON array, in order (whitespace around elements dropped).
CREATE FUNCTION pg_temp.elems(j json) RETURNS text[] LANGUAGE sql IMMUTABLE AS $$
    SELECT coalesce((SELECT array_agg(e::text ORDER BY n)
                     FROM json_array_elements(j) WITH ORDINALITY AS t(e, n)), '{}')
$$;

------------------------------------------------------------------------------
-- C1: unknown checkpoint and thread.
------------------------------------------------------------------------------
SELECT pg_temp.reset();
SELECT ok(sandbox_persist.checkpoint_get('1') IS NULL, 'C1.1 get of an unknown checkpoint is NULL');
SELECT ok(sandbox_persist.checkpoint_get_head('thread-a') IS NULL, 'C1.2 head of an unknown thread is NULL');
SELECT is(sandbox_persist.checkpoint_list('thread-a')::jsonb, '[]'::jsonb,
    'C1.3 list of an unknown thread is []');

------------------------------------------------------------------------------
-- C2: append a root and a child.
------------------------------------------------------------------------------
SELECT pg_temp.reset();
SELECT is(pg_temp.app(pg_temp.cp('1'), NULL)::jsonb, '{"headId":"1"}'::jsonb,
    'C2.1 appending root 1 returns exactly {headId: 1}');
SELECT is(pg_temp.app(pg_temp.cp('2', '1'), '1')::jsonb, '{"headId":"2"}'::jsonb,
    'C2.2 appending 2 (parent 1) returns exactly {headId: 2}');
SELECT is(sandbox_persist.checkpoint_get_head('thread-a'), '2', 'C2.3 head is 2');
SELECT is(pg_temp.ids(sandbox_persist.checkpoint_list('thread-a')), ARRAY['1', '2'],
    'C2.4 list is [1, 2]');
SELECT is(sandbox_persist.checkpoint_list('thread-a')::jsonb,
    jsonb_build_array(pg_temp.rec(pg_temp.cp('1')), pg_temp.rec(pg_temp.cp('2', '1'))),
    'C2.5 listed records equal the appended checkpoints (parentCheckpointId null on the root, no extra keys)');
SELECT is(sandbox_persist.checkpoint_get('2')::jsonb, pg_temp.rec(pg_temp.cp('2', '1')),
    'C2.6 get(2) equals the appended checkpoint');
SELECT is(sandbox_persist.checkpoint_list_blob_references()::jsonb,
    pg_temp.refs(pg_temp.fkey('1'), '1', pg_temp.fkey('2'), '1'),
    'C2.7 each checkpoint''s key has one reference');

------------------------------------------------------------------------------
-- C3: stale head, then parent mismatch.
------------------------------------------------------------------------------
SELECT pg_temp.reset();
SELECT pg_temp.app(pg_temp.cp('1'), NULL);
SELECT * FROM pg_temp.rejects(pg_temp.q_app(pg_temp.cp('2'), NULL), pg_temp.e('STALE_HEAD'),
    'C3.1 appending 2 (parent null) expecting head null after root 1');
SELECT * FROM pg_temp.rejects(pg_temp.q_app(pg_temp.cp('3'), '1'), pg_temp.e('PARENT_MISMATCH'),
    'C3.2 appending 3 (parent null) expecting head 1');
SELECT is(sandbox_persist.checkpoint_get_head('thread-a'), '1', 'C3.3 head is still 1');
SELECT * FROM pg_temp.rejects(pg_temp.q_app(pg_temp.cp('4', '1', 'thread-b'), NULL), pg_temp.e('PARENT_MISMATCH'),
    'C3.4 appending 4 (parent 1) expecting no head on an empty thread');

------------------------------------------------------------------------------
-- C4: a duplicate id is reported before the parent mismatch.
------------------------------------------------------------------------------
SELECT pg_temp.reset();
SELECT pg_temp.app(pg_temp.cp('1'), NULL);
SELECT * FROM pg_temp.rejects(pg_temp.q_app(pg_temp.cp('1'), '1'), pg_temp.e('DUPLICATE_ID'),
    'C4.1 re-appending 1 (parent null) expecting head 1');
SELECT is(sandbox_persist.checkpoint_get('1')::jsonb, pg_temp.rec(pg_temp.cp('1')),
    'C4.2 the stored checkpoint 1 is untouched');
SELECT pg_temp.w('thread-b');
SELECT * FROM pg_temp.rejects(pg_temp.q_app(pg_temp.cp('1', NULL, 'thread-b'), NULL), pg_temp.e('DUPLICATE_ID'),
    'C4.3 appending id 1 as a root of another thread (ids are global)');

------------------------------------------------------------------------------
-- C5: threads are independent.
------------------------------------------------------------------------------
SELECT pg_temp.reset();
SELECT pg_temp.app(pg_temp.cp('1'), NULL);
SELECT is(pg_temp.app(pg_temp.cp('2', NULL, 'thread-b'), NULL)::jsonb, '{"headId":"2"}'::jsonb,
    'C5.1 thread-b takes its own root while thread-a has a head');
SELECT pg_temp.app(pg_temp.cp('3', '1'), '1');
SELECT is(sandbox_persist.checkpoint_get_head('thread-a'), '3', 'C5.2 head of thread-a is 3');
SELECT is(sandbox_persist.checkpoint_get_head('thread-b'), '2', 'C5.3 head of thread-b is 2');
SELECT is(pg_temp.ids(sandbox_persist.checkpoint_list('thread-a')), ARRAY['1', '3'],
    'C5.4 list of thread-a is [1, 3]');
SELECT is(pg_temp.ids(sandbox_persist.checkpoint_list('thread-b')), ARRAY['2'],
    'C5.5 list of thread-b is [2]');
SELECT is(sandbox_persist.checkpoint_get('2')->>'threadId', 'thread-b',
    'C5.6 checkpoint 2 belongs to thread-b');
SELECT * FROM pg_temp.rejects(pg_temp.q_app(pg_temp.cp('4', '3', 'thread-b'), '3'), pg_temp.e('STALE_HEAD'),
    'C5.7 appending to thread-b expecting thread-a''s head');

------------------------------------------------------------------------------
-- C6: list order is createdAt, then id.
------------------------------------------------------------------------------
SELECT pg_temp.reset();
SELECT pg_temp.app(pg_temp.cp('z', NULL, 'thread-a', 2), NULL);
SELECT pg_temp.app(pg_temp.cp('a', 'z', 'thread-a', 1), 'z');
SELECT pg_temp.app(pg_temp.cp('b', 'a', 'thread-a', 1), 'a');
SELECT is(pg_temp.ids(sandbox_persist.checkpoint_list('thread-a')), ARRAY['a', 'b', 'z'],
    'C6.1 chain z (2) -> a (1) -> b (1) lists as [a, b, z]');
SELECT is(sandbox_persist.checkpoint_get_head('thread-a'), 'b', 'C6.2 head is b');
-- createdAt is compared as a number (10 after 9), fractions and negatives included.
SELECT pg_temp.app(pg_temp.cp('n10', NULL, 'thread-b', 10), NULL);
SELECT pg_temp.app(pg_temp.cp('n9', 'n10', 'thread-b', 9), 'n10');
SELECT pg_temp.app(pg_temp.cp('n1.5', 'n9', 'thread-b', 1.5), 'n9');
SELECT pg_temp.app(pg_temp.cp('neg', 'n1.5', 'thread-b', -2.25), 'n1.5');
SELECT is(pg_temp.ids(sandbox_persist.checkpoint_list('thread-b')), ARRAY['neg', 'n1.5', 'n9', 'n10'],
    'C6.3 createdAt orders numerically (-2.25, 1.5, 9, 10)');
SELECT is((sandbox_persist.checkpoint_get('n1.5')->>'createdAt')::numeric, 1.5,
    'C6.4 a fractional createdAt round-trips');
SELECT pg_temp.app(pg_temp.cp('prec', 'neg', 'thread-b', 0.30000000000000004), 'neg');
SELECT is((sandbox_persist.checkpoint_get('prec')->>'createdAt')::numeric, 0.30000000000000004,
    'C6.5 createdAt keeps full double precision (0.1 + 0.2)');
SELECT pg_temp.app(pg_temp.cp('epoch', 'prec', 'thread-b', 1795939220789.5), 'prec');
SELECT is((sandbox_persist.checkpoint_get('epoch')->>'createdAt')::numeric, 1795939220789.5,
    'C6.6 a fractional epoch-ms createdAt round-trips exactly');

------------------------------------------------------------------------------
-- C7: equal createdAt: ids in UTF-8 byte order; reference keys in byte order.
------------------------------------------------------------------------------
SELECT pg_temp.reset();
SELECT pg_temp.app(pg_temp.cp('é'), NULL);
SELECT pg_temp.app(pg_temp.cp('a', 'é'), 'é');
SELECT pg_temp.app(pg_temp.cp('B', 'a'), 'a');
SELECT pg_temp.app(pg_temp.cp('😀', 'B'), 'B');
SELECT is(pg_temp.ids(sandbox_persist.checkpoint_list('thread-a')), ARRAY['B', 'a', 'é', '😀'],
    'C7.1 chain é, a, B, 😀 (createdAt 1) lists as [B, a, é, 😀]');
SELECT is(sandbox_persist.checkpoint_list_blob_references()::jsonb,
    pg_temp.refs(pg_temp.fkey('1'), '4'),
    'C7.2 the shared fixture key has 4 references (one per checkpoint)');
-- Keys that sort differently by insertion, length and case of prefix.
SELECT pg_temp.app(pg_temp.cp('k1', NULL, 'thread-b', 1, jsonb_build_array(
    jsonb_build_object('path', 'f.bin', 'kind', 'file', 'blobKey', pg_temp.fkey(repeat('f', 64)), 'size', 1),
    jsonb_build_object('path', 'a.bin', 'kind', 'file', 'blobKey', pg_temp.fkey('a0'), 'size', 1),
    jsonb_build_object('path', '9.bin', 'kind', 'file', 'blobKey', pg_temp.fkey('9' || repeat('0', 63)), 'size', 1)))
    || jsonb_build_object('artifacts', jsonb_build_array(jsonb_build_object(
        'artifactId', 'art', 'name', 'n', 'mimeType', 'text/plain', 'size', 1,
        'blobKey', 'sandbox-artifacts/sha256/' || repeat('e', 64), 'createdAt', 1))), NULL);
SELECT is(
    (SELECT array_agg(e->>'key' ORDER BY n)
       FROM json_array_elements(sandbox_persist.checkpoint_list_blob_references()) WITH ORDINALITY AS t(e, n)),
    (SELECT array_agg(k ORDER BY convert_to(k, 'UTF8'))
       FROM unnest(ARRAY[pg_temp.fkey(repeat('f', 64)), pg_temp.fkey('a0'),
                         pg_temp.fkey('9' || repeat('0', 63)), pg_temp.fkey('1'),
                         'sandbox-artifacts/sha256/' || repeat('e', 64)]) AS k),
    'C7.3 listBlobReferences keys come back in ascending byte order');
-- UTF-8 byte order, not UTF-16 order (U+E000 before U+10000); a prefix first.
SELECT pg_temp.app(pg_temp.cp(U&'\+010000', NULL, 'thread-c'), NULL);
SELECT pg_temp.app(pg_temp.cp(U&'\E000', U&'\+010000', 'thread-c'), U&'\+010000');
SELECT pg_temp.app(pg_temp.cp('pq', U&'\E000', 'thread-c'), U&'\E000');
SELECT pg_temp.app(pg_temp.cp('p', 'pq', 'thread-c'), 'pq');
SELECT is(pg_temp.ids(sandbox_persist.checkpoint_list('thread-c')), ARRAY['p', 'pq', U&'\E000', U&'\+010000'],
    'C7.4 ties list in UTF-8 byte order: shorter prefix first, U+E000 before U+10000');

------------------------------------------------------------------------------
-- C12: stored data is independent of inputs and outputs; two files sharing
-- one key count one reference.
------------------------------------------------------------------------------
SELECT pg_temp.reset();
CREATE TEMP TABLE c12 AS SELECT pg_temp.cp('1', NULL, 'thread-a', NULL, jsonb_build_array(
    jsonb_build_object('path', 'b.txt', 'kind', 'file', 'blobKey', pg_temp.fkey('12'), 'size', 1),
    jsonb_build_object('path', 'a.txt', 'kind', 'file', 'blobKey', pg_temp.fkey('12'), 'size', 1))) AS cp;
SELECT pg_temp.app(cp, NULL) FROM c12;
-- "Mutate" the input and a returned checkpoint, then read again.
UPDATE c12 SET cp = jsonb_set(cp, '{files,0,path}', '"mutated.txt"');
CREATE TEMP TABLE c12_out AS SELECT sandbox_persist.checkpoint_get('1')::jsonb AS got;
UPDATE c12_out SET got = jsonb_set(got, '{conversation}', '[]');
SELECT is(sandbox_persist.checkpoint_get('1')::jsonb,
    pg_temp.rec(jsonb_set((SELECT cp FROM c12), '{files,0,path}', '"b.txt"')),
    'C12.1 get still returns the checkpoint as appended (files in the given order, b.txt before a.txt)');
SELECT isnt(sandbox_persist.checkpoint_get('1')::jsonb, (SELECT got FROM c12_out),
    'C12.2 a modified copy of a returned checkpoint is not what is stored');
SELECT is(sandbox_persist.checkpoint_list_blob_references()::jsonb, pg_temp.refs(pg_temp.fkey('12'), '1'),
    'C12.3 two files sharing one key count one reference');

------------------------------------------------------------------------------
-- C13: two checkpoints sharing a key count 2; deleting the head leaves 1.
------------------------------------------------------------------------------
SELECT pg_temp.reset();
SELECT pg_temp.app(pg_temp.cp('1', NULL, 'thread-a', NULL, jsonb_build_array(
    jsonb_build_object('path', 'shared.txt', 'kind', 'file', 'blobKey', pg_temp.fkey('13'), 'size', 1))), NULL);
SELECT pg_temp.app(pg_temp.cp('2', '1', 'thread-a', NULL, jsonb_build_array(
    jsonb_build_object('path', 'shared.txt', 'kind', 'file', 'blobKey', pg_temp.fkey('13'), 'size', 1))), '1');
SELECT is(sandbox_persist.checkpoint_list_blob_references()::jsonb, pg_temp.refs(pg_temp.fkey('13'), '2'),
    'C13.1 two checkpoints sharing a key count 2');
SELECT lives_ok(format('SELECT sandbox_persist.checkpoint_delete_head(%L::json)',
    pg_temp.del_input('thread-a', '2', pg_temp.w())), 'C13.2 deleting head 2 succeeds');
SELECT is(sandbox_persist.checkpoint_list_blob_references()::jsonb, pg_temp.refs(pg_temp.fkey('13'), '1'),
    'C13.3 after deleting the head the key counts 1');

------------------------------------------------------------------------------
-- C14: writer conflict, independence, release.
------------------------------------------------------------------------------
SELECT pg_temp.reset();
SELECT pg_temp.w();
SELECT * FROM pg_temp.rejects(pg_temp.q_acquire('thread-a'), pg_temp.e('WRITER_CONFLICT'),
    'C14.1 a second acquire on thread-a');
SELECT is(pg_temp.sp(pg_temp.q_acquire('thread-b')), 'no error', 'C14.2 thread-b can be acquired');
SELECT is(sandbox_persist.checkpoint_release_writer(pg_temp.w()), true,
    'C14.3 releasing the thread-a lease returns true');
CREATE TEMP TABLE c14 AS SELECT sandbox_persist.checkpoint_acquire_writer('thread-a') AS w;
SELECT ok((SELECT w IS NOT NULL FROM c14), 'C14.4 after release thread-a can be acquired again');
SELECT is((SELECT (w->>'fence')::bigint FROM c14), (pg_temp.w()->>'fence')::bigint + 1,
    'C14.5 the new lease has the next fence (release does not reset it)');
SELECT is((SELECT w->>'threadId' FROM c14), 'thread-a', 'C14.6 the lease names its thread');
SELECT isnt((SELECT w->>'ownerToken' FROM c14), pg_temp.w()->>'ownerToken',
    'C14.7 the new lease has a fresh owner token');
-- Server clock: the wall clock at the call, not the transaction start.
SELECT pg_sleep(0.05);
CREATE TEMP TABLE c14_clock AS SELECT floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint AS t_before,
    sandbox_persist.checkpoint_acquire_writer('thread-c') AS w,
    ceil(extract(epoch FROM clock_timestamp()) * 1000)::bigint AS t_after;
SELECT ok((SELECT (w->>'expiresAt')::bigint BETWEEN t_before + 120000 AND t_after + 120000 FROM c14_clock),
    'C14.8 on the server clock expiresAt = wall-clock now + 120000 (not the transaction start)');
CREATE TEMP TABLE c14_state AS SELECT pg_temp.state() AS s;
SELECT is(sandbox_persist.checkpoint_release_writer(pg_temp.w()), false,
    'C14.9 releasing an already released lease again returns false');
SELECT is(pg_temp.state(), (SELECT s FROM c14_state), 'C14.10 the second release changed nothing');

------------------------------------------------------------------------------
-- C15: renew on the injected clock (starts at 1000, advances by renewAfterMs).
------------------------------------------------------------------------------
SELECT pg_temp.reset();
CREATE TEMP TABLE c15 AS SELECT sandbox_persist.checkpoint_acquire_writer('thread-a', NULL, 1000) AS w;
SELECT is((SELECT w FROM c15)::jsonb - 'ownerToken',
    jsonb_build_object('threadId', 'thread-a', 'fence', 1, 'expiresAt', 1000 + 120000),
    'C15.1 the first lease has fence 1 and expiresAt = now + 120000');
SELECT matches((SELECT w->>'ownerToken' FROM c15),
    '^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$', 'C15.2 ownerToken is a UUID');
CREATE TEMP TABLE c15_renew AS
    SELECT sandbox_persist.checkpoint_renew_writer(w, NULL, 1000 + 45000) AS r FROM c15;
SELECT is((SELECT r::jsonb FROM c15_renew), jsonb_build_object('expiresAt', 1000 + 45000 + 120000),
    'C15.3 renew after renewAfterMs returns exactly {expiresAt: now + leaseDurationMs}');
SELECT cmp_ok((SELECT (r->>'expiresAt')::bigint FROM c15_renew), '>',
    (SELECT (w->>'expiresAt')::bigint FROM c15), 'C15.4 expiresAt grows');
-- The renewed expiry is what counts: still current just before it.
SELECT is(pg_temp.sp(pg_temp.q_app(pg_temp.cp('1'), NULL, 1000 + 45000 + 120000 - 1, (SELECT w FROM c15))),
    'no error', 'C15.5 the renewed lease is current until its new expiresAt');
SELECT is((SELECT sandbox_persist.checkpoint_renew_writer(w, 5000, 50000) FROM c15)::jsonb,
    jsonb_build_object('expiresAt', 50000 + 5000), 'C15.6 renew with lease_ms 5000 sets expiresAt = now + 5000');

------------------------------------------------------------------------------
-- C16: a stale lease's release does not free a replacement.
------------------------------------------------------------------------------
SELECT pg_temp.reset();
CREATE TEMP TABLE c16 AS SELECT sandbox_persist.checkpoint_acquire_writer('thread-a', NULL, 1000) AS old;
ALTER TABLE c16 ADD COLUMN nw json;
UPDATE c16 SET nw = sandbox_persist.checkpoint_acquire_writer('thread-a', NULL, 1000 + 120000 + 1);
SELECT ok((SELECT nw IS NOT NULL FROM c16), 'C16.1 after expiry (+lease +1 ms) a replacement acquire succeeds');
SELECT is((SELECT sandbox_persist.checkpoint_release_writer(old) FROM c16), false,
    'C16.2 the old lease''s release is a no-op (false)');
SELECT * FROM pg_temp.rejects(pg_temp.q_acquire('thread-a', 1000 + 120000 + 1), pg_temp.e('WRITER_CONFLICT'),
    'C16.3 after the old release a new acquire still conflicts');
SELECT is(pg_temp.sp((SELECT pg_temp.q_renew(nw, 1000 + 120000 + 1) FROM c16)), 'no error',
    'C16.4 the replacement lease is still current');
CREATE TEMP TABLE c16_state AS SELECT pg_temp.state() AS s;
SELECT is(sandbox_persist.checkpoint_release_writer(
        '{"threadId": "thread-b", "ownerToken": "missing-owner", "fence": 1}'), false,
    'C16.5 releasing a fabricated writer of a thread that never had a lease returns false');
SELECT is(pg_temp.state(), (SELECT s FROM c16_state), 'C16.6 the fabricated release created or changed nothing');
CREATE TEMP TABLE c16_b AS SELECT sandbox_persist.checkpoint_acquire_writer('thread-b', NULL, 1000) AS w;
SELECT is((SELECT sandbox_persist.checkpoint_release_writer(w) FROM c16_b), true,
    'C16.7 an expired lease nobody took over can still be released (release ignores expiry)');
SELECT is((sandbox_persist.checkpoint_acquire_writer('thread-b', NULL, 1000)->>'fence')::bigint,
    (SELECT (w->>'fence')::bigint + 1 FROM c16_b),
    'C16.8 after that release the thread is free before expiry, with the next fence');

------------------------------------------------------------------------------
-- C17: after expiry the old lease's renew, append and deleteHead fail, before
-- and after a takeover; its release changes nothing. Clock = wall clock.
------------------------------------------------------------------------------
SELECT pg_temp.reset();
CREATE TEMP TABLE c17 AS
    SELECT (extract(epoch FROM clock_timestamp()) * 1000)::bigint AS t0, NULL::json AS old, NULL::json AS nw;
UPDATE c17 SET old = sandbox_persist.checkpoint_acquire_writer('thread-a', NULL, t0);
SELECT is((SELECT pg_temp.app(pg_temp.cp('1'), NULL, t0, old) FROM c17)::jsonb, '{"headId":"1"}'::jsonb,
    'C17.1 the lease appends 1 while current');
SELECT * FROM pg_temp.rejects((SELECT pg_temp.q_renew(old, t0 + 120001) FROM c17),
    pg_temp.e('WRITER_LOST'), 'C17.2 renew after expiry, before takeover');
SELECT * FROM pg_temp.rejects((SELECT pg_temp.q_app(pg_temp.cp('2', '1'), '1', t0 + 120001, old) FROM c17),
    pg_temp.e('WRITER_LOST'), 'C17.3 append after expiry, before takeover');
SELECT * FROM pg_temp.rejects((SELECT pg_temp.q_del('thread-a', '1', old, t0 + 120001) FROM c17),
    pg_temp.e('WRITER_LOST'), 'C17.4 deleteHead after expiry, before takeover');
UPDATE c17 SET nw = sandbox_persist.checkpoint_acquire_writer('thread-a', NULL, t0 + 120001);
SELECT cmp_ok((SELECT (nw->>'fence')::bigint FROM c17), '>', (SELECT (old->>'fence')::bigint FROM c17),
    'C17.5 the takeover lease has a larger fence');
SELECT * FROM pg_temp.rejects((SELECT pg_temp.q_renew(old, t0 + 120001) FROM c17),
    pg_temp.e('WRITER_LOST'), 'C17.6 renew after takeover');
SELECT * FROM pg_temp.rejects((SELECT pg_temp.q_app(pg_temp.cp('2', '1'), '1', t0 + 120001, old) FROM c17),
    pg_temp.e('WRITER_LOST'), 'C17.7 append after takeover');
SELECT * FROM pg_temp.rejects((SELECT pg_temp.q_del('thread-a', '1', old, t0 + 120001) FROM c17),
    pg_temp.e('WRITER_LOST'), 'C17.8 deleteHead after takeover');
CREATE TEMP TABLE c17_before AS SELECT pg_temp.state() AS s;
SELECT is((SELECT sandbox_persist.checkpoint_release_writer(old) FROM c17), false,
    'C17.9 the old lease''s release returns false');
SELECT is(pg_temp.state(), (SELECT s FROM c17_before), 'C17.10 the old release changed nothing');
SELECT is((SELECT pg_temp.sp(pg_temp.q_acquire('thread-a', t0 + 120001)) FROM c17), pg_temp.e('WRITER_CONFLICT'),
    'C17.11 the takeover lease still holds the thread');
SELECT is((SELECT pg_temp.app(pg_temp.cp('2', '1'), '1', t0 + 120001, nw) FROM c17)::jsonb, '{"headId":"2"}'::jsonb,
    'C17.12 the takeover lease can append');

------------------------------------------------------------------------------
-- C18: deleteHead.
------------------------------------------------------------------------------
SELECT pg_temp.reset();
SELECT pg_temp.app(pg_temp.cp('1'), NULL);
SELECT pg_temp.app(pg_temp.cp('2', '1'), '1');
SELECT * FROM pg_temp.rejects(pg_temp.q_del('thread-a', '1', pg_temp.w()), pg_temp.e('NOT_HEAD'),
    'C18.1 deleteHead of 1 while the head is 2');
SELECT lives_ok(pg_temp.q_del('thread-a', '2', pg_temp.w()), 'C18.2 deleting head 2 succeeds');
SELECT is(sandbox_persist.checkpoint_get_head('thread-a'), '1', 'C18.3 the head moves to the parent 1');
SELECT ok(sandbox_persist.checkpoint_get('2') IS NULL, 'C18.4 checkpoint 2 is gone');
SELECT is(sandbox_persist.checkpoint_list_blob_references()::jsonb, pg_temp.refs(pg_temp.fkey('1'), '1'),
    'C18.5 only the key of 1 is referenced');
SELECT lives_ok(pg_temp.q_del('thread-a', '1', pg_temp.w()), 'C18.6 deleting head 1 succeeds');
SELECT ok(sandbox_persist.checkpoint_get_head('thread-a') IS NULL, 'C18.7 the thread has no head');
SELECT is(sandbox_persist.checkpoint_list_blob_references()::jsonb, '[]'::jsonb,
    'C18.8 no references remain (empty store gives [])');
SELECT is(sandbox_persist.checkpoint_list('thread-a')::jsonb, '[]'::jsonb, 'C18.9 the thread lists []');
SELECT * FROM pg_temp.rejects(pg_temp.q_del('thread-a', '1', pg_temp.w()), pg_temp.e('NOT_HEAD'),
    'C18.10 deleteHead on a thread without a head');
SELECT pg_temp.app(pg_temp.cp('1'), NULL);
SELECT pg_temp.app(pg_temp.cp('2', '1'), '1');
SELECT * FROM pg_temp.rejects(pg_temp.q_del('thread-a', '1', (pg_temp.w()::jsonb || '{"fence": 99}')::json),
    pg_temp.e('WRITER_LOST'), 'C18.11 deleteHead of a non-head with a non-current writer (lease checked first)');

------------------------------------------------------------------------------
-- R14: an absent parentCheckpointId is a root, read back as null.
------------------------------------------------------------------------------
SELECT pg_temp.reset();
SELECT is(pg_temp.app(pg_temp.cp('1') - 'parentCheckpointId', NULL)::jsonb, '{"headId":"1"}'::jsonb,
    'R14.1 a checkpoint without parentCheckpointId is accepted as a root');
SELECT is(json_typeof(sandbox_persist.checkpoint_get('1')->'parentCheckpointId'), 'null',
    'R14.2 it reads back with parentCheckpointId: null (key present)');
SELECT is(json_typeof(sandbox_persist.checkpoint_list('thread-a')->0->'parentCheckpointId'), 'null',
    'R14.3 list shows parentCheckpointId: null too');
SELECT * FROM pg_temp.rejects(pg_temp.q_app(pg_temp.cp('2') - 'parentCheckpointId', '1'),
    pg_temp.e('PARENT_MISMATCH'), 'R14.4 an absent parent is null, so it mismatches expected head 1');
SELECT is(pg_temp.app(pg_temp.cp('2', '1') || '{"label": null, "sourceRunId": null}', '1')::jsonb,
    '{"headId":"2"}'::jsonb, 'R14.5 label and sourceRunId given as JSON null are accepted');
SELECT is(sandbox_persist.checkpoint_get('2')::jsonb, pg_temp.rec(pg_temp.cp('2', '1')),
    'R14.6 label and sourceRunId given as null are unset and omitted on output');
SELECT is(pg_temp.app(pg_temp.cp('3', '2') || '{"reason": "named", "label": "", "sourceRunId": "run-3"}', '2')::jsonb,
    '{"headId":"3"}'::jsonb, 'R14.7 a named checkpoint with label and sourceRunId is accepted');
SELECT is(sandbox_persist.checkpoint_get('3')::jsonb,
    pg_temp.rec(pg_temp.cp('3', '2') || '{"reason": "named", "label": "", "sourceRunId": "run-3"}'),
    'R14.8 present label (even empty) and sourceRunId round-trip');

------------------------------------------------------------------------------
-- R15: empty checkpoint id, parent id or expected head id.
------------------------------------------------------------------------------
SELECT pg_temp.reset();
SELECT pg_temp.app(pg_temp.cp('1'), NULL);
SELECT * FROM pg_temp.rejects(pg_temp.q_app(pg_temp.cp('2', '1') || '{"id": ""}', '1'),
    pg_temp.e('INVALID_ID'), 'R15.1 empty checkpoint id');
SELECT * FROM pg_temp.rejects(pg_temp.q_app(pg_temp.cp('2', ''), '1'),
    pg_temp.e('INVALID_ID'), 'R15.2 empty parent id');
SELECT * FROM pg_temp.rejects(pg_temp.q_app(pg_temp.cp('2', '1'), ''),
    pg_temp.e('INVALID_ID'), 'R15.3 empty expected head id');
SELECT * FROM pg_temp.rejects(format('SELECT sandbox_persist.checkpoint_append(%L::json, %L::json)',
        json_build_object('checkpoint', pg_temp.cp('2', '1')::json, 'writer', pg_temp.w()), pg_temp.conv('2')),
    pg_temp.e('INVALID_ID'), 'R15.4 absent expectedHeadId (undefined)');
SELECT is(pg_temp.sp(pg_temp.q_app(pg_temp.cp('2', '1'), '1')), 'no error',
    'R15.5 the same append with valid ids succeeds');

------------------------------------------------------------------------------
-- R16: a writer of another thread.
------------------------------------------------------------------------------
SELECT pg_temp.reset();
SELECT pg_temp.app(pg_temp.cp('1'), NULL);
SELECT pg_temp.w('thread-b');
SELECT * FROM pg_temp.rejects(pg_temp.q_app(pg_temp.cp('2', '1'), '1', NULL, pg_temp.w('thread-b')),
    pg_temp.e('WRITER_LOST'), 'R16.1 append with the current lease of thread-b');
SELECT * FROM pg_temp.rejects(pg_temp.q_del('thread-a', '1', pg_temp.w('thread-b')),
    pg_temp.e('WRITER_LOST'), 'R16.2 deleteHead with the current lease of thread-b');
SELECT * FROM pg_temp.rejects(pg_temp.q_app(pg_temp.cp('2', '1') || '{"files": null}', '1', NULL, pg_temp.w('thread-b')),
    pg_temp.e('WRITER_LOST'), 'R16.3 the writer-thread mismatch is reported before an invalid entry');

------------------------------------------------------------------------------
-- R36: lease boundary on the injected clock (expiresAt = 121000).
------------------------------------------------------------------------------
SELECT pg_temp.reset();
CREATE TEMP TABLE r36 AS SELECT sandbox_persist.checkpoint_acquire_writer('thread-a', NULL, 1000) AS w;
SELECT is((SELECT (w->>'expiresAt')::bigint FROM r36), 121000::bigint, 'R36.1 expiresAt = 1000 + 120000');
SELECT is((SELECT pg_temp.app(pg_temp.cp('1'), NULL, 120999, w) FROM r36)::jsonb, '{"headId":"1"}'::jsonb,
    'R36.2 at expiresAt - 1 the lease is current: append succeeds');
SELECT * FROM pg_temp.rejects(pg_temp.q_acquire('thread-a', 120999), pg_temp.e('WRITER_CONFLICT'),
    'R36.3 at expiresAt - 1 another acquire');
SELECT * FROM pg_temp.rejects((SELECT pg_temp.q_renew(w, 121000) FROM r36), pg_temp.e('WRITER_LOST'),
    'R36.4 at expiresAt renew');
SELECT * FROM pg_temp.rejects((SELECT pg_temp.q_app(pg_temp.cp('2', '1'), '1', 121000, w) FROM r36),
    pg_temp.e('WRITER_LOST'), 'R36.5 at expiresAt append');
SELECT * FROM pg_temp.rejects((SELECT pg_temp.q_del('thread-a', '1', w, 121000) FROM r36),
    pg_temp.e('WRITER_LOST'), 'R36.6 at expiresAt deleteHead');
SELECT is((sandbox_persist.checkpoint_acquire_writer('thread-a', NULL, 121000)->>'fence')::bigint,
    (SELECT (w->>'fence')::bigint + 1 FROM r36), 'R36.7 at expiresAt another acquire takes over with fence + 1');

------------------------------------------------------------------------------
-- S2: deleteHead removes dependent rows; the id can be appended again.
------------------------------------------------------------------------------
SELECT pg_temp.reset();
SELECT pg_temp.app(pg_temp.cp('1') || jsonb_build_object('artifacts', jsonb_build_array(jsonb_build_object(
    'artifactId', 'art-1', 'name', 'report.txt', 'mimeType', 'text/plain', 'size', 3,
    'blobKey', 'sandbox-artifacts/sha256/' || repeat('a', 64), 'createdAt', 1.5))), NULL);
SELECT is(sandbox_persist.checkpoint_list_blob_references()::jsonb,
    pg_temp.refs('sandbox-artifacts/sha256/' || repeat('a', 64), '1', pg_temp.fkey('1'), '1'),
    'S2.1 the file key and the artifact key are referenced');
SELECT is((sandbox_persist.checkpoint_get('1')->'artifacts'->0)::jsonb,
    json_build_object('artifactId', 'art-1', 'name', 'report.txt', 'mimeType', 'text/plain', 'size', 3,
        'blobKey', 'sandbox-artifacts/sha256/' || repeat('a', 64), 'createdAt', 1.5)::jsonb,
    'S2.9 the checkpoint artifact reads back with exactly its six fields');
SELECT lives_ok(pg_temp.q_del('thread-a', '1', pg_temp.w()), 'S2.2 deleteHead of 1 succeeds');
SELECT is((SELECT count(*) FROM sandbox_persist.checkpoint_blob_refs WHERE checkpoint_id = '1'), 0::bigint,
    'S2.3 no reference rows of 1 remain');
SELECT is((SELECT count(*) FROM sandbox_persist.checkpoints WHERE checkpoint_id = '1'), 0::bigint,
    'S2.4 no checkpoint row of 1 remains');
SELECT is(sandbox_persist.checkpoint_list_blob_references()::jsonb, '[]'::jsonb, 'S2.5 no references remain');
SELECT is(pg_temp.app(pg_temp.cp('1', NULL, 'thread-a', 7, jsonb_build_array(
        jsonb_build_object('path', 'again', 'kind', 'dir'))), NULL)::jsonb,
    '{"headId":"1"}'::jsonb, 'S2.6 the same id can be appended again');
SELECT is(sandbox_persist.checkpoint_get('1')::jsonb,
    pg_temp.rec(pg_temp.cp('1', NULL, 'thread-a', 7, jsonb_build_array(jsonb_build_object('path', 'again', 'kind', 'dir')))),
    'S2.7 the re-appended checkpoint carries only its own entries and artifacts');
SELECT is(sandbox_persist.checkpoint_list_blob_references()::jsonb, '[]'::jsonb,
    'S2.8 no reference survives from the deleted checkpoint');

------------------------------------------------------------------------------
-- S16, S18.
------------------------------------------------------------------------------
SELECT pg_temp.reset();
SELECT pg_temp.app(pg_temp.cp('1'), NULL);
SELECT * FROM pg_temp.rejects(pg_temp.q_acquire(''), pg_temp.e('INVALID_ID'), 'S16 acquireWriter('''')');
SELECT * FROM pg_temp.rejects(pg_temp.q_app(pg_temp.cp('2', '1') || '{"threadId": 7}', '1'),
    pg_temp.e('INVALID_ID'), 'S18 append whose threadId is the number 7');

------------------------------------------------------------------------------
-- V13/V14 (opaque payloads) and §8: the conversation is stored and returned
-- byte-exactly; only separators between elements may change.
------------------------------------------------------------------------------
SELECT pg_temp.reset();
CREATE TEMP TABLE conv AS SELECT
    '{"role":"user","content":"nul \u0000 inside"}'::text AS m_nul,
    '{"role":"tool","content":"lone \ud800 and \udc00 and pair \ud83d\ude00"}'::text AS m_sur,
    '{"z":1,"a":2,"role":"assistant","z":3,"s":"\u00e9\/\"\\ é"}'::text AS m_keys,
    '{ "role" : "assistant",  "content" : null ,"n":1.50, "e":1E+2 }'::text AS m_ws;
SELECT is(sandbox_persist.checkpoint_append(pg_temp.input(pg_temp.cp('1'), NULL, pg_temp.w()),
        (SELECT (E'[\n  ' || m_nul || E' ,\n  ' || m_sur || ',' || m_keys || E'\t,' || m_ws || ' ]')::json FROM conv))::jsonb,
    '{"headId":"1"}'::jsonb, 'V13.20 a conversation with \u0000 and lone surrogate escapes is accepted');
SELECT is(pg_temp.elems(pg_temp.field(sandbox_persist.checkpoint_get('1'), 'conversation')),
    (SELECT ARRAY[m_nul, m_sur, m_keys, m_ws] FROM conv),
    '§8.1 get returns every message text exactly, in order (inner whitespace and number spelling kept)');
SELECT is((pg_temp.elems(pg_temp.field(sandbox_persist.checkpoint_get('1'), 'conversation')))[1],
    (SELECT m_nul FROM conv), 'V13.21 a message containing \u0000 comes back escaped, unchanged');
SELECT is((pg_temp.elems(pg_temp.field(sandbox_persist.checkpoint_get('1'), 'conversation')))[2],
    (SELECT m_sur FROM conv), 'V14.20 lone surrogate escapes come back unchanged');
SELECT is((pg_temp.elems(pg_temp.field(sandbox_persist.checkpoint_get('1'), 'conversation')))[3],
    (SELECT m_keys FROM conv), '§8.2 key order, duplicate keys and escapes (\u00e9, \/) are kept');
SELECT is(pg_temp.elems(pg_temp.field(pg_temp.nth(sandbox_persist.checkpoint_list('thread-a'), 1), 'conversation')),
    (SELECT ARRAY[m_nul, m_sur, m_keys, m_ws] FROM conv), '§8.3 list returns the same message texts');
SELECT is(json_typeof(pg_temp.nth(pg_temp.field(sandbox_persist.checkpoint_get('1'), 'conversation'), 4)->'content'), 'null',
    '§8.4 content: null inside a message is kept (key present, no null stripping)');
SELECT is(sandbox_persist.checkpoint_append(pg_temp.input(pg_temp.cp('2', '1'), '1', pg_temp.w()),
        ' [ ] ')::jsonb, '{"headId":"2"}'::jsonb, '§8.5 an empty conversation is accepted');
SELECT is(json_array_length(sandbox_persist.checkpoint_get('2')->'conversation'), 0,
    '§8.6 an empty conversation reads back as []');
SELECT sandbox_persist.checkpoint_append(pg_temp.input(pg_temp.cp('3', '2'), '2', pg_temp.w()),
    '[1,"x",null,[],{},true,-0.0]');
SELECT is(pg_temp.elems(sandbox_persist.checkpoint_get('3')->'conversation'),
    ARRAY['1', '"x"', 'null', '[]', '{}', 'true', '-0.0'], '§8.13 messages of any JSON type round-trip as text');

------------------------------------------------------------------------------
-- §8: no quadratic storage: each distinct message is stored once.
------------------------------------------------------------------------------
SELECT pg_temp.reset();
SELECT sandbox_persist.checkpoint_append(pg_temp.input(pg_temp.cp('1'), NULL, pg_temp.w()),
    '[{"role":"user","content":"m1"}]');
SELECT sandbox_persist.checkpoint_append(pg_temp.input(pg_temp.cp('2', '1'), '1', pg_temp.w()),
    E'[ {"role":"user","content":"m1"} ,\n {"role":"assistant","content":"m2"}\n]');
SELECT sandbox_persist.checkpoint_append(pg_temp.input(pg_temp.cp('3', '2'), '2', pg_temp.w()),
    '[{"role":"user","content":"m1"},{"role":"assistant","content":"m2"},{"role":"user","content":"m3"},{"role":"user","content":"m1"}]');
SELECT is((SELECT count(*) || ' rows, ' || sum(message_count) || ' messages' FROM sandbox_persist.conversation_blocks),
    '3 rows, 4 messages',
    '§8.7 three checkpoints sharing messages store each append''s new messages once (4, not 7; separators do not count)');
SELECT is(pg_temp.elems(sandbox_persist.checkpoint_get('3')->'conversation'),
    ARRAY['{"role":"user","content":"m1"}', '{"role":"assistant","content":"m2"}',
          '{"role":"user","content":"m3"}', '{"role":"user","content":"m1"}'],
    '§8.8 a conversation repeating a message still reads back in full, in order');
SELECT is(pg_temp.elems(sandbox_persist.checkpoint_get('2')->'conversation'),
    ARRAY['{"role":"user","content":"m1"}', '{"role":"assistant","content":"m2"}'],
    '§8.9 a shared prefix reads back for the earlier checkpoint');
SELECT lives_ok(pg_temp.q_del('thread-a', '3', pg_temp.w()), '§8.10 deleting the head succeeds');
SELECT is(pg_temp.elems(sandbox_persist.checkpoint_get('2')->'conversation'),
    ARRAY['{"role":"user","content":"m1"}', '{"role":"assistant","content":"m2"}'],
    '§8.11 deleting a checkpoint does not affect messages shared with others');
SELECT is(pg_temp.elems(pg_temp.field(sandbox_persist.checkpoint_get('1'), 'conversation')),
    ARRAY['{"role":"user","content":"m1"}'], '§8.12 the first checkpoint still has its one message');

SELECT * FROM finish();
ROLLBACK;
