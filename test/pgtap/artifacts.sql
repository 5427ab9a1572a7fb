-- pgTAP: artifact store (docs/contract/chat-stores.md §4).
-- Cases: P13-P16, R7, R35, S21, V1-V6, V9-V16 (artifact parts).
-- Run with: pg_prove -d <db> test/pgtap/artifacts.sql (needs allow_test_reset).
BEGIN;
SELECT plan(134);
SELECT sandbox_persist._reset_for_tests();
\ir lib/chat_store_helpers.psql

-- A bad call: asserts the SQLSTATE (and, when given, a pattern the error
-- message must match, e.g. the unknown key's name), then that nothing changed.
CREATE FUNCTION pg_temp.rejects(sql text, code text, descr text, msg_re text DEFAULT NULL)
RETURNS SETOF text LANGUAGE plpgsql AS $$
DECLARE
    before text := pg_temp.state();
    e text[];
BEGIN
    RETURN NEXT throws_ok(sql, code::char(5), NULL, descr || ' -> ' || code);
    IF msg_re IS NOT NULL THEN
        e := pg_temp.err(sql);
        RETURN NEXT matches(coalesce(e[2], 'no error'), msg_re, descr || ': the message names it');
    END IF;
    RETURN NEXT is(pg_temp.state(), before, descr || ': nothing changed');
END
$$;

-- Artifact ids of a JSON array of records, in array order (NULL for NULL).
CREATE FUNCTION pg_temp.ids(j json) RETURNS text[] LANGUAGE sql AS $$
    SELECT CASE WHEN j IS NULL THEN NULL ELSE
        coalesce((SELECT array_agg(e->>'artifactId' ORDER BY n)
                  FROM json_array_elements(j) WITH ORDINALITY AS t(e, n)), '{}') END
$$;

-- Save a minimal artifact record.
CREATE FUNCTION pg_temp.mk(id text, run text, thread text, created double precision) RETURNS void
LANGUAGE sql AS $$
    SELECT sandbox_persist.artifact_save(json_build_object(
        'artifactId', id, 'runId', run, 'threadId', thread, 'name', id || '.bin',
        'mimeType', 'application/octet-stream', 'size', 1, 'createdAt', created))
$$;

-- The plan of a statement, one line per plan node (costs off).
CREATE FUNCTION pg_temp.plan(sql text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    line text;
    result text := '';
BEGIN
    FOR line IN EXECUTE 'EXPLAIN (COSTS OFF) ' || sql LOOP
        result := result || line || E'\n';
    END LOOP;
    RETURN result;
END
$$;

------------------------------------------------------------------------------
-- P13: save, get, list; full replace.
------------------------------------------------------------------------------
SELECT ok(sandbox_persist.artifact_get('art-missing') IS NULL,
    'P13.1 get of a missing artifact is SQL NULL');
SELECT is(sandbox_persist.artifact_list('run-unknown')::jsonb, '[]'::jsonb,
    'P13.2 list of an unknown run is [] (not NULL)');
SELECT lives_ok($$SELECT sandbox_persist.artifact_save(
        '{"artifactId":"\ud800\udc00","runId":"run-art","threadId":"thread-art","blobKey":"artifacts/run-art/astral",
          "name":"astral.png","mimeType":"image/png","size":4,"createdAt":100}')$$,
    'P13.3 save of the U+10000 record with a blobKey succeeds');
SELECT is(sandbox_persist.artifact_get(chr(65536))::text,
    '{"artifactId":"' || chr(65536) || '","runId":"run-art","threadId":"thread-art","blobKey":"artifacts/run-art/astral","name":"astral.png","mimeType":"image/png","size":4,"createdAt":100}',
    'P13.4 the U+10000 record reads back with every field, in the contract field order');
SELECT sandbox_persist.artifact_save(
    '{"artifactId":"\ue000","runId":"run-art","threadId":"thread-art","name":"private.txt","mimeType":"text/plain",
      "size":5,"sourceUrl":"https://example.test/private.txt","createdAt":100}');
SELECT is(sandbox_persist.artifact_get(chr(57344))::jsonb,
    jsonb_build_object('artifactId', chr(57344), 'runId', 'run-art', 'threadId', 'thread-art',
        'name', 'private.txt', 'mimeType', 'text/plain', 'size', 5,
        'sourceUrl', 'https://example.test/private.txt', 'createdAt', 100),
    'P13.5 the U+E000 record reads back its sourceUrl and has no blobKey');
SELECT sandbox_persist.artifact_save(
    '{"artifactId":"art-other-run","runId":"run-art-other","threadId":"thread-art","name":"o","mimeType":"text/plain","size":0,"createdAt":50}');
SELECT is(pg_temp.ids(sandbox_persist.artifact_list('run-art')), ARRAY[chr(57344), chr(65536)],
    'P13.6 list(run-art) is [U+E000, U+10000] (UTF-8 byte order) and excludes run-art-other''s record');
SELECT is((sandbox_persist.artifact_list('run-art')->1)::jsonb, sandbox_persist.artifact_get(chr(65536))::jsonb,
    'P13.7 list elements are complete records, equal to get');
SELECT sandbox_persist.artifact_save(
    '{"artifactId":"\ud800\udc00","runId":"run-art","threadId":"thread-art","name":"renamed.png","mimeType":"image/png","size":9,"createdAt":100}');
SELECT is(sandbox_persist.artifact_get(chr(65536))::jsonb,
    jsonb_build_object('artifactId', chr(65536), 'runId', 'run-art', 'threadId', 'thread-art',
        'name', 'renamed.png', 'mimeType', 'image/png', 'size', 9, 'createdAt', 100),
    'P13.8 re-saving with a new name, size 9 and no blobKey leaves blobKey absent (full replace)');
SELECT is(pg_temp.ids(sandbox_persist.artifact_list('run-art')), ARRAY[chr(57344), chr(65536)],
    'P13.9 the order is unchanged after the re-save');
SELECT is((SELECT count(*) FROM sandbox_persist.artifacts), 3::bigint,
    'P13.10 a re-save replaces the row instead of adding one');
SELECT sandbox_persist.artifact_save(
    '{"artifactId":"\ue000","runId":"run-art","threadId":"thread-art","name":"private.txt","mimeType":"text/plain","size":5,"createdAt":100}');
SELECT ok(NOT sandbox_persist.artifact_get(chr(57344))::jsonb ? 'sourceUrl',
    'P13.11 re-saving without sourceUrl leaves sourceUrl absent');

------------------------------------------------------------------------------
-- P14: listForThread is the complete thread history in order.
------------------------------------------------------------------------------
SELECT pg_temp.mk('thread-b', 'run-p14-2', 'thread-p14', 2);
SELECT pg_temp.mk('thread-a', 'run-p14-2', 'thread-p14', 2);
SELECT pg_temp.mk('thread-early', 'run-p14-1', 'thread-p14', 1);
SELECT pg_temp.mk('thread-elsewhere', 'run-p14-1', 'thread-p14-other', 0);
SELECT is(pg_temp.ids(sandbox_persist.artifact_list_for_thread('thread-p14')),
    ARRAY['thread-early', 'thread-a', 'thread-b'],
    'P14.1 listForThread returns [thread-early (1), thread-a (2), thread-b (2)] across runs and excludes the other thread');
SELECT is(sandbox_persist.artifact_list_for_thread('thread-nobody')::jsonb, '[]'::jsonb,
    'P14.2 listForThread of an unknown thread is []');

------------------------------------------------------------------------------
-- P15 and R7: equal createdAt orders by UTF-8 bytes of the id.
------------------------------------------------------------------------------
SELECT pg_temp.mk(chr(65536), 'run-p15', 'thread-p15', 7);
SELECT pg_temp.mk('a', 'run-p15', 'thread-p15', 7);
SELECT pg_temp.mk(chr(57344), 'run-p15', 'thread-p15', 7);
SELECT is(pg_temp.ids(sandbox_persist.artifact_list_for_thread('thread-p15')),
    ARRAY['a', chr(57344), chr(65536)],
    'P15.1 with equal createdAt, listForThread returns [a, U+E000, U+10000]');
SELECT is(pg_temp.ids(sandbox_persist.artifact_list('run-p15')),
    ARRAY['a', chr(57344), chr(65536)],
    'P15.2 list orders the same way');
SELECT pg_temp.mk('😀', 'run-r7', 'thread-r7', 3);
SELECT pg_temp.mk('é', 'run-r7', 'thread-r7', 3);
SELECT pg_temp.mk('a', 'run-r7', 'thread-r7', 3);
SELECT is(pg_temp.ids(sandbox_persist.artifact_list_for_thread('thread-r7')), ARRAY['a', 'é', '😀'],
    'R7.1 ids 😀, é, a with equal createdAt list as [a, é, 😀]');
SELECT is(pg_temp.ids(sandbox_persist.artifact_list('run-r7')), ARRAY['a', 'é', '😀'],
    'R7.2 list of the run gives the same order');
SELECT pg_temp.mk('ab', 'run-r7b', 'thread-r7b', 3);
SELECT pg_temp.mk('a', 'run-r7b', 'thread-r7b', 3);
SELECT pg_temp.mk('B', 'run-r7b', 'thread-r7b', 3);
SELECT is(pg_temp.ids(sandbox_persist.artifact_list('run-r7b')), ARRAY['B', 'a', 'ab'],
    'R7.3 a shorter prefix sorts first and upper case before lower case (bytes, not a locale)');

------------------------------------------------------------------------------
-- createdAt: any finite number, numeric order, shortest round-trip output.
------------------------------------------------------------------------------
SELECT pg_temp.mk('t-100', 'run-time', 'thread-time', 100);
SELECT pg_temp.mk('t-9.5', 'run-time', 'thread-time', 9.5);
SELECT pg_temp.mk('t-10', 'run-time', 'thread-time', 10);
SELECT pg_temp.mk('t-neg', 'run-time', 'thread-time', -5);
SELECT is(pg_temp.ids(sandbox_persist.artifact_list('run-time')), ARRAY['t-neg', 't-9.5', 't-10', 't-100'],
    'P14.3 createdAt orders numerically, fractions and negatives included');
SELECT sandbox_persist.artifact_save('{"artifactId":"t-frac","runId":"run-frac","threadId":"thread-frac","name":"n","mimeType":"m","size":0,"createdAt":0.1}');
SELECT is(sandbox_persist.artifact_get('t-frac')::text,
    '{"artifactId":"t-frac","runId":"run-frac","threadId":"thread-frac","name":"n","mimeType":"m","size":0,"createdAt":0.1}',
    'P13.12 createdAt 0.1 reads back as 0.1 (shortest round-trip form)');
SELECT sandbox_persist.artifact_save('{"artifactId":"t-frac","runId":"run-frac","threadId":"thread-frac","name":"n","mimeType":"m","size":0,"createdAt":1700000000000.25}');
SELECT is(sandbox_persist.artifact_get('t-frac')->>'createdAt', '1700000000000.25',
    'P13.13 a fractional epoch millisecond keeps its fraction');
SELECT sandbox_persist.artifact_save('{"artifactId":"t-frac","runId":"run-frac","threadId":"thread-frac","name":"n","mimeType":"m","size":0,"createdAt":1E2}');
SELECT is(sandbox_persist.artifact_get('t-frac')->>'createdAt', '100',
    'P13.14 an exponent form reads back as a plain number');
SELECT sandbox_persist.artifact_save('{"artifactId":"t-frac","runId":"run-frac","threadId":"thread-frac","name":"n","mimeType":"m","size":9007199254740991,"createdAt":1e21}');
SELECT is(json_typeof(sandbox_persist.artifact_get('t-frac')->'createdAt'), 'number',
    'P13.15 createdAt 1e21 is still a JSON number');
SELECT is((sandbox_persist.artifact_get('t-frac')->>'createdAt')::float8, 1e21::float8,
    'P13.16 createdAt 1e21 reads back as the same number');
SELECT is(sandbox_persist.artifact_get('t-frac')->>'size', '9007199254740991',
    'P13.17 size 2^53 - 1 is accepted and reads back exactly');

------------------------------------------------------------------------------
-- P16: delete and deleteForRun.
------------------------------------------------------------------------------
SELECT sandbox_persist._reset_for_tests();
SELECT pg_temp.mk('del-1', 'run-del', 'thread-del', 1);
SELECT pg_temp.mk('del-2', 'run-del', 'thread-del', 2);
SELECT pg_temp.mk('del-3', 'run-del', 'thread-del', 3);
SELECT pg_temp.mk('keep-1', 'run-keep', 'thread-del', 4);
SELECT is(sandbox_persist.artifact_delete('del-1'), true,
    'P16.1 deleting an existing artifact returns true');
SELECT ok(sandbox_persist.artifact_get('del-1') IS NULL,
    'P16.2 the deleted artifact is gone');
SELECT is(pg_temp.ids(sandbox_persist.artifact_list_for_thread('thread-del')), ARRAY['del-2', 'del-3', 'keep-1'],
    'P16.3 deleting one artifact removes only it');
SELECT is(sandbox_persist.artifact_delete('del-1'), false,
    'P16.4 deleting it again is silent (false, no error)');
SELECT is(sandbox_persist.artifact_delete_for_run('run-del'), 2,
    'P16.5 deleteForRun returns the number of rows deleted (2)');
SELECT is(sandbox_persist.artifact_list('run-del')::jsonb, '[]'::jsonb,
    'P16.6 deleteForRun removes the run''s remaining artifacts');
SELECT is(pg_temp.ids(sandbox_persist.artifact_list('run-keep')), ARRAY['keep-1'],
    'P16.7 deleteForRun leaves another run''s artifacts');
SELECT is(sandbox_persist.artifact_delete_for_run('run-del'), 0,
    'P16.8 deleteForRun on a run with no artifacts is silent (0)');
SELECT is(sandbox_persist.artifact_delete_for_run('run-never'), 0,
    'P16.9 deleteForRun on an unknown run is silent (0)');

------------------------------------------------------------------------------
-- R35: a re-save may move a record to another run and thread.
------------------------------------------------------------------------------
SELECT pg_temp.mk('r35', 'run-r35-old', 'thread-r35-old', 1);
SELECT pg_temp.mk('r35', 'run-r35-new', 'thread-r35-new', 1);
SELECT is(sandbox_persist.artifact_list('run-r35-old')::jsonb, '[]'::jsonb,
    'R35.1 the old run''s list no longer contains the moved artifact');
SELECT is(sandbox_persist.artifact_list_for_thread('thread-r35-old')::jsonb, '[]'::jsonb,
    'R35.2 the old thread''s list no longer contains it');
SELECT is(pg_temp.ids(sandbox_persist.artifact_list('run-r35-new')), ARRAY['r35'],
    'R35.3 the new run''s list contains it');
SELECT is(pg_temp.ids(sandbox_persist.artifact_list_for_thread('thread-r35-new')), ARRAY['r35'],
    'R35.4 the new thread''s list contains it');
SELECT is(sandbox_persist.artifact_get('r35')->>'runId', 'run-r35-new',
    'R35.5 get reports the new run');
SELECT is(sandbox_persist.artifact_delete_for_run('run-r35-old'), 0,
    'R35.6 deleteForRun of the old run no longer touches it');

------------------------------------------------------------------------------
-- S21: listForThread and list are served by their indexes without a sort.
------------------------------------------------------------------------------
SELECT sandbox_persist._reset_for_tests();
-- 5000 records, 50 per thread, written thread after thread as an app would.
SELECT count(*) FROM (
    SELECT sandbox_persist.artifact_save(json_build_object(
        'artifactId', 'art-' || t || '-' || j, 'runId', 'run-' || t || '-' || (j / 10),
        'threadId', 'thread-' || t, 'name', 'n', 'mimeType', 'm', 'size', j,
        'createdAt', 1700000000000 + t * 100000 + (j * 37) % 500))
    FROM (SELECT t, j FROM generate_series(1, 100) t, generate_series(1, 50) j ORDER BY t, j) s) x;
ANALYZE sandbox_persist.artifacts;
-- The exact statements of artifacts.c (artifact_by_thread, artifact_by_run).
PREPARE s21_thread(text) AS
    SELECT artifact_id, run_id, thread_id, blob_key, name, mime_type, size, source_url, created_at
    FROM sandbox_persist.artifacts WHERE thread_id = $1 ORDER BY created_at, artifact_id;
PREPARE s21_run(text) AS
    SELECT artifact_id, run_id, thread_id, blob_key, name, mime_type, size, source_url, created_at
    FROM sandbox_persist.artifacts WHERE run_id = $1 ORDER BY created_at, artifact_id;
SELECT matches(pg_temp.plan($$EXECUTE s21_thread('thread-7')$$), 'artifacts_thread_order',
    'S21.1 with default settings the listForThread query uses the (thread_id, created_at, artifact_id) index');
-- On a table this small the planner may prefer a bitmap scan plus a sort of
-- one thread's rows; turning the unordered scans off asks whether the index
-- itself delivers the list order (a wrong column, order or collation would
-- still need a Sort node here).
SET LOCAL enable_seqscan = off;
SET LOCAL enable_bitmapscan = off;
SELECT unalike(pg_temp.plan($$EXECUTE s21_thread('thread-7')$$), '%Sort%',
    'S21.2 the listForThread query plan has no Sort node');
SELECT matches(pg_temp.plan($$EXECUTE s21_thread('thread-7')$$), 'Index Scan using artifacts_thread_order',
    'S21.3 the listForThread query is an index scan on (thread_id, created_at, artifact_id)');
SELECT unalike(pg_temp.plan($$EXECUTE s21_run('run-7-2')$$), '%Sort%',
    'S21.4 the list (by run) query plan has no Sort node');
SELECT matches(pg_temp.plan($$EXECUTE s21_run('run-7-2')$$), 'Index Scan using artifacts_run_order',
    'S21.5 the list (by run) query is an index scan on (run_id, created_at, artifact_id)');
SET LOCAL plan_cache_mode = force_generic_plan;
SELECT unalike(pg_temp.plan($$EXECUTE s21_thread('thread-7')$$), '%Sort%',
    'S21.6 the generic plan (the kind the C code keeps) has no Sort node either');
RESET plan_cache_mode;
RESET enable_bitmapscan;
RESET enable_seqscan;
SELECT is(pg_temp.ids(sandbox_persist.artifact_list_for_thread('thread-7')),
    ARRAY(SELECT artifact_id FROM sandbox_persist.artifacts WHERE thread_id = 'thread-7'
          ORDER BY created_at, artifact_id COLLATE "C"),
    'S21.7 the function returns the index order');
DEALLOCATE s21_thread;
DEALLOCATE s21_run;

------------------------------------------------------------------------------
-- V: bad input. Fixture artifact v-art.
------------------------------------------------------------------------------
SELECT sandbox_persist._reset_for_tests();
SELECT sandbox_persist.artifact_save(
    '{"artifactId":"v-art","runId":"v-run","threadId":"v-t","blobKey":"artifacts/v-run/v-art","name":"n","mimeType":"m","size":1,"createdAt":1}');

-- V1 malformed JSON text
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.artifact_save('{"artifactId":"v-new",')$$,
    '22P02', 'V1.1 malformed JSON record to artifact_save');

-- V2 record not an object
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.artifact_save('[{"artifactId":"v-new","runId":"v-run","threadId":"v-t","name":"n","mimeType":"m","size":1,"createdAt":1}]')$$,
    '22023', 'V2.1 artifact record given as a JSON array');
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.artifact_save('null')$$,
    '22023', 'V2.2 artifact record given as JSON null');

-- V3 wrong JSON types
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.artifact_save('{"artifactId":"v-art","runId":"v-run","threadId":"v-t","name":"n","mimeType":"m","size":"1","createdAt":1}')$$,
    '22023', 'V3.1 size "1" (a string)');
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.artifact_save('{"artifactId":"v-art","runId":"v-run","threadId":"v-t","name":"n","mimeType":"m","size":1,"createdAt":"1"}')$$,
    '22023', 'V3.2 createdAt "1" (a string)');
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.artifact_save('{"artifactId":"v-art","runId":"v-run","threadId":"v-t","name":5,"mimeType":"m","size":1,"createdAt":1}')$$,
    '22023', 'V3.3 name 5 (a number)');
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.artifact_save('{"artifactId":"v-art","runId":"v-run","threadId":"v-t","blobKey":5,"name":"n","mimeType":"m","size":1,"createdAt":1}')$$,
    '22023', 'V3.4 blobKey 5 (a number)');
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.artifact_save('{"artifactId":"v-art","runId":"v-run","threadId":"v-t","name":"n","mimeType":"m","size":1,"sourceUrl":true,"createdAt":1}')$$,
    '22023', 'V3.5 sourceUrl true (a boolean)');
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.artifact_save('{"artifactId":"v-art","runId":7,"threadId":"v-t","name":"n","mimeType":"m","size":1,"createdAt":1}')$$,
    '22023', 'V3.6 runId 7 (a number)');

-- V4 SQL NULL for a required argument
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.artifact_save(NULL)$$,
    '22004', 'V4.1 artifact_save(NULL)');
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.artifact_get(NULL)$$,
    '22004', 'V4.2 artifact_get(NULL)');
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.artifact_delete_for_run(NULL)$$,
    '22004', 'V4.3 artifact_delete_for_run(NULL)');

-- V5 required key absent or JSON null
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.artifact_save('{"artifactId":"v-new","runId":"v-run","threadId":"v-t","mimeType":"m","size":1,"createdAt":1}')$$,
    '22004', 'V5.1 name absent');
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.artifact_save('{"artifactId":"v-new","runId":"v-run","threadId":"v-t","name":"n","mimeType":null,"size":1,"createdAt":1}')$$,
    '22004', 'V5.2 mimeType JSON null');
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.artifact_save('{"artifactId":"v-new","threadId":"v-t","name":"n","mimeType":"m","size":1,"createdAt":1}')$$,
    '22004', 'V5.3 runId absent');
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.artifact_save('{"artifactId":"v-new","runId":"v-run","name":"n","mimeType":"m","size":1,"createdAt":1}')$$,
    '22004', 'V5.4 threadId absent');
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.artifact_save('{"artifactId":"v-new","runId":"v-run","threadId":"v-t","name":"n","mimeType":"m","createdAt":1}')$$,
    '22004', 'V5.5 size absent');
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.artifact_save('{"artifactId":"v-new","runId":"v-run","threadId":"v-t","name":"n","mimeType":"m","size":1}')$$,
    '22004', 'V5.6 createdAt absent');

-- V6 unknown keys (the message names the key)
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.artifact_save('{"artifactId":"v-art","runId":"v-run","threadId":"v-t","blob_key":"k","name":"n","mimeType":"m","size":1,"createdAt":1}')$$,
    '22023', 'V6.1 unknown record key blob_key', 'blob_key');
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.artifact_save('{"artifactId":"v-art","runId":"v-run","threadId":"v-t","name":"n","mimeType":"m","size":1,"createdAt":1,"url":"u"}')$$,
    '22023', 'V6.2 url (a PersistedArtifactRef key) is not an artifact record key', 'url');

-- V9 fractional size
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.artifact_save('{"artifactId":"v-art","runId":"v-run","threadId":"v-t","name":"n","mimeType":"m","size":1.5,"createdAt":1}')$$,
    '22023', 'V9.1 artifact size 1.5');

-- V10 beyond +/-(2^53 - 1)
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.artifact_save('{"artifactId":"v-art","runId":"v-run","threadId":"v-t","name":"n","mimeType":"m","size":9007199254740992,"createdAt":1}')$$,
    '22003', 'V10.1 artifact size 2^53');
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.artifact_save('{"artifactId":"v-art","runId":"v-run","threadId":"v-t","name":"n","mimeType":"m","size":1,"createdAt":1e400}')$$,
    '22003', 'V10.2 createdAt 1e400 (not a finite double)');

-- V11 negative size
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.artifact_save('{"artifactId":"v-art","runId":"v-run","threadId":"v-t","name":"n","mimeType":"m","size":-1,"createdAt":1}')$$,
    '22003', 'V11.1 artifact size -1');
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.artifact_save('{"artifactId":"v-new","runId":"v-run","threadId":"v-t","name":"n","mimeType":"m","size":-9007199254740991,"createdAt":1}')$$,
    '22003', 'V11.2 artifact size -(2^53 - 1) for a new record');

-- V12 NaN or Infinity arriving as JSON null for a required number
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.artifact_save('{"artifactId":"v-art","runId":"v-run","threadId":"v-t","name":"n","mimeType":"m","size":1,"createdAt":null}')$$,
    '22004', 'V12.1 createdAt JSON null (NaN or Infinity from JSON.stringify)');
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.artifact_save('{"artifactId":"v-art","runId":"v-run","threadId":"v-t","name":"n","mimeType":"m","size":null,"createdAt":1}')$$,
    '22004', 'V12.2 size JSON null');

-- V13 U+0000 in structural strings
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.artifact_save('{"artifactId":"v-\u0000","runId":"v-run","threadId":"v-t","name":"n","mimeType":"m","size":1,"createdAt":1}')$$,
    '22021', 'V13.1 artifactId containing \u0000');
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.artifact_save('{"artifactId":"v-art","runId":"v-run","threadId":"v-t","blobKey":"k\u0000","name":"n","mimeType":"m","size":1,"createdAt":1}')$$,
    '22021', 'V13.2 blobKey containing \u0000');
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.artifact_save('{"artifactId":"v-art","runId":"v-run","threadId":"v-t","name":"a\u0000.png","mimeType":"m","size":1,"createdAt":1}')$$,
    '22021', 'V13.3 name containing \u0000');
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.artifact_list(E'v-run\x00')$$,
    '22021', 'V13.4 a text run id containing U+0000');

-- V14 lone surrogate escapes in structural strings
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.artifact_save('{"artifactId":"\udc00","runId":"v-run","threadId":"v-t","name":"n","mimeType":"m","size":1,"createdAt":1}')$$,
    '22021', 'V14.1 artifactId \udc00');
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.artifact_save('{"artifactId":"v-art","runId":"v-run","threadId":"v-t","name":"n","mimeType":"m","size":1,"sourceUrl":"https://x/\ud800","createdAt":1}')$$,
    '22021', 'V14.2 sourceUrl with a lone surrogate');

-- V15 over-long identifiers and keys
SELECT * FROM pg_temp.rejects(format($$SELECT sandbox_persist.artifact_save('{"artifactId":"%s","runId":"v-run","threadId":"v-t","name":"n","mimeType":"m","size":1,"createdAt":1}')$$, repeat('a', 1025)),
    '22001', 'V15.1 artifactId of 1025 bytes');
SELECT * FROM pg_temp.rejects(format($$SELECT sandbox_persist.artifact_save('{"artifactId":"v-art","runId":"v-run","threadId":"v-t","blobKey":"%s","name":"n","mimeType":"m","size":1,"createdAt":1}')$$, repeat('k', 2049)),
    '22001', 'V15.2 blobKey of 2049 bytes');
SELECT lives_ok(format($$SELECT sandbox_persist.artifact_save('{"artifactId":"v-long-key","runId":"v-run","threadId":"v-t","blobKey":"%s","name":"n","mimeType":"m","size":1,"createdAt":1}')$$, repeat('k', 2048)),
    'V15.3 (control) a blobKey of 2048 bytes is accepted');

-- V16 empty identifiers
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.artifact_save('{"artifactId":"","runId":"v-run","threadId":"v-t","name":"n","mimeType":"m","size":1,"createdAt":1}')$$,
    '22023', 'V16.1 empty artifactId');
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.artifact_save('{"artifactId":"v-art","runId":"v-run","threadId":"","name":"n","mimeType":"m","size":1,"createdAt":1}')$$,
    '22023', 'V16.2 empty threadId');
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.artifact_save('{"artifactId":"v-art","runId":"v-run","threadId":"v-t","blobKey":"","name":"n","mimeType":"m","size":1,"createdAt":1}')$$,
    '22023', 'V16.3 empty blobKey (a blob key is never empty)');
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.artifact_get('')$$,
    '22023', 'V16.4 artifact_get('''')');
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.artifact_delete('')$$,
    '22023', 'V16.5 artifact_delete('''')');
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.artifact_list_for_thread('')$$,
    '22023', 'V16.6 artifact_list_for_thread('''')');
SELECT lives_ok($$SELECT sandbox_persist.artifact_save('{"artifactId":"v-empty-strings","runId":"v-run","threadId":"v-t","name":"","mimeType":"","size":0,"sourceUrl":"","createdAt":0}')$$,
    'V16.7 (control) name, mimeType and sourceUrl are free strings: empty is accepted');
SELECT is(sandbox_persist.artifact_get('v-art')::text,
    '{"artifactId":"v-art","runId":"v-run","threadId":"v-t","blobKey":"artifacts/v-run/v-art","name":"n","mimeType":"m","size":1,"createdAt":1}',
    'V16.8 after every refused save the fixture record is unchanged');

SELECT * FROM finish();
ROLLBACK;
