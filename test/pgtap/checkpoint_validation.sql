-- pgTAP: checkpoint input validation (docs/contract/checkpoint-store.md §2-§4,
-- docs/contract/README.md §4).
-- Cases: C8-C11, S4-S15, R17-R23, and the checkpoint parts of V1-V4, V6, V11,
-- V13-V16, V19, V23. Every rejection asserts its SQLSTATE (and, for class SP,
-- its code name, with an errdetail that does not start with it) and that head, list, references,
-- lease rows and stored messages are identical before and after.
-- Run with: pg_prove -d <db> test/pgtap/checkpoint_validation.sql
-- (needs sandbox_persist.allow_test_reset and allow_client_clock on).
BEGIN;
SELECT plan(426);
SELECT sandbox_persist._reset_for_tests();
SET sandbox_persist.allow_client_clock = on;

------------------------------------------------------------------------------
-- Helpers (temporary, gone at ROLLBACK).
------------------------------------------------------------------------------

CREATE TEMP TABLE writers (thread_id text PRIMARY KEY, writer json NOT NULL);

-- The whole acquire result of a thread's writer, acquired on first use.
\ir lib/checkpoint_helpers.psql

-- Runs a statement and rolls it back: 'accepted', or the error as pg_temp.sp.
CREATE FUNCTION pg_temp.try(stmt text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    st text;
    det text;
BEGIN
    EXECUTE stmt;
    RAISE EXCEPTION 'roll back' USING ERRCODE = 'ZX999';
EXCEPTION WHEN OTHERS THEN
    GET STACKED DIAGNOSTICS st = RETURNED_SQLSTATE, det = PG_EXCEPTION_DETAIL;
    IF st = 'ZX999' THEN
        RETURN 'accepted';
    END IF;
    RETURN st || ' ' || coalesce((SELECT c->>'codeName' FROM json_array_elements(sandbox_persist.error_codes()) c WHERE c->>'sqlstate' = st AND coalesce(det, '') !~ '^[A-Z][A-Z0-9_]+: '), CASE WHEN st LIKE 'SP%' THEN '<detail: ' || coalesce(det, 'none') || '>' ELSE split_part(coalesce(det, ''), ':', 1) END);
END
$$;

-- The SQLSTATE and code name of a contract error (docs/contract/README.md §4.2).
CREATE FUNCTION pg_temp.e(name text) RETURNS text LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE name
        WHEN 'STALE_HEAD' THEN 'SP001 SANDBOX_SNAPSHOT_' WHEN 'PARENT_MISMATCH' THEN 'SP002 SANDBOX_SNAPSHOT_'
        WHEN 'DUPLICATE_ID' THEN 'SP003 SANDBOX_SNAPSHOT_' WHEN 'NOT_HEAD' THEN 'SP004 SANDBOX_SNAPSHOT_'
        WHEN 'WRITER_CONFLICT' THEN 'SP005 SANDBOX_SNAPSHOT_' WHEN 'WRITER_LOST' THEN 'SP006 SANDBOX_SNAPSHOT_'
        WHEN 'INVALID_ID' THEN 'SP007 SANDBOX_SNAPSHOT_' WHEN 'INVALID_ENTRY' THEN 'SP008 SANDBOX_SNAPSHOT_'
        WHEN 'CLIENT_CLOCK_NOT_ALLOWED' THEN 'SP901 '
    END || name
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

-- A call that must fail: its code ('SPnnn NAME', or a bare SQLSTATE for
-- standard codes), then that nothing changed.
CREATE FUNCTION pg_temp.rejects(stmt text, expected text, descr text)
RETURNS SETOF text LANGUAGE plpgsql AS $$
DECLARE
    before text := pg_temp.state();
    got text := pg_temp.sp(stmt);
BEGIN
    IF length(expected) = 5 THEN
        got := left(got, 5);
    END IF;
    RETURN NEXT is(got, expected, descr || ' -> ' || expected);
    RETURN NEXT is(pg_temp.state(), before, descr || ': head, list, references unchanged');
END
$$;

-- Fixture pieces (checkpoint store suite fixture).
CREATE FUNCTION pg_temp.fkey(seed text) RETURNS text LANGUAGE sql IMMUTABLE AS $$
    SELECT 'sandbox-files/sha256/' || lpad(seed, 64, '0')
$$;
CREATE FUNCTION pg_temp.akey(seed text) RETURNS text LANGUAGE sql IMMUTABLE AS $$
    SELECT 'sandbox-artifacts/sha256/' || lpad(seed, 64, '0')
$$;
CREATE FUNCTION pg_temp.f(path text, key text DEFAULT NULL) RETURNS jsonb LANGUAGE sql IMMUTABLE AS $$
    SELECT jsonb_build_object('path', path, 'kind', 'file', 'blobKey', coalesce(key, pg_temp.fkey('2')), 'size', 1)
$$;
CREATE FUNCTION pg_temp.d(path text) RETURNS jsonb LANGUAGE sql IMMUTABLE AS $$
    SELECT jsonb_build_object('path', path, 'kind', 'dir')
$$;
CREATE FUNCTION pg_temp.art() RETURNS jsonb LANGUAGE sql IMMUTABLE AS $$
    SELECT jsonb_build_object('artifactId', 'art-1', 'name', 'report.txt', 'mimeType', 'text/plain',
                              'size', 3, 'blobKey', pg_temp.akey('a'), 'createdAt', 1.5)
$$;
-- A valid checkpoint with the given id and parent in thread-a.
CREATE FUNCTION pg_temp.cp(id text, parent text) RETURNS jsonb LANGUAGE sql IMMUTABLE AS $$
    SELECT jsonb_build_object('id', id, 'threadId', 'thread-a', 'parentCheckpointId', parent,
        'createdAt', 2, 'reason', 'automatic', 'files', jsonb_build_array(pg_temp.f(id || '.txt')),
        'artifacts', jsonb_build_array(pg_temp.art()))
$$;
-- The baseline: checkpoint 2 on top of head 1, which must be accepted.
CREATE FUNCTION pg_temp.base() RETURNS jsonb LANGUAGE sql IMMUTABLE AS $$
    SELECT pg_temp.cp('2', '1')
$$;
CREATE FUNCTION pg_temp.with_files(VARIADIC entries jsonb[]) RETURNS jsonb LANGUAGE sql IMMUTABLE AS $$
    SELECT pg_temp.base() || jsonb_build_object('files', to_jsonb(entries))
$$;
CREATE FUNCTION pg_temp.with_art(a jsonb) RETURNS jsonb LANGUAGE sql IMMUTABLE AS $$
    SELECT pg_temp.base() || jsonb_build_object('artifacts', jsonb_build_array(a))
$$;
CREATE FUNCTION pg_temp.input(cp jsonb, expected text DEFAULT '1', writer json DEFAULT NULL) RETURNS json
LANGUAGE sql AS $$
    SELECT json_build_object('checkpoint', cp::json, 'expectedHeadId', expected,
                             'writer', coalesce(writer, pg_temp.w()))
$$;
-- An append statement from raw input text and conversation text.
CREATE FUNCTION pg_temp.q(input text, conv text DEFAULT '[{"role":"user","content":"2"}]',
                          now_ms bigint DEFAULT NULL) RETURNS text LANGUAGE sql IMMUTABLE AS $$
    SELECT format('SELECT sandbox_persist.checkpoint_append(%L::json, %L::json, %L::bigint)', input, conv, now_ms)
$$;
-- An append statement of a checkpoint (baseline expected head 1, thread-a writer).
CREATE FUNCTION pg_temp.qa(cp jsonb, expected text DEFAULT '1', writer json DEFAULT NULL) RETURNS text
LANGUAGE sql AS $$
    SELECT pg_temp.q(pg_temp.input(cp, expected, writer)::text)
$$;
-- Replace the JSON string "<placeholder>" by a raw JSON fragment (for escapes
-- that jsonb cannot hold: \u0000, lone surrogates).
CREATE FUNCTION pg_temp.sub(j text, placeholder text, fragment text) RETURNS text LANGUAGE sql IMMUTABLE AS $$
    SELECT replace(j, '"' || placeholder || '"', fragment)
$$;
CREATE FUNCTION pg_temp.qsub(cp jsonb, fragment text, expected text DEFAULT '1', writer json DEFAULT NULL)
RETURNS text LANGUAGE sql AS $$
    SELECT pg_temp.q(pg_temp.sub(pg_temp.input(cp, expected, writer)::text, '@X@', fragment))
$$;
CREATE FUNCTION pg_temp.qdel(input text, now_ms bigint DEFAULT NULL) RETURNS text LANGUAGE sql IMMUTABLE AS $$
    SELECT format('SELECT sandbox_persist.checkpoint_delete_head(%L::json, %L::bigint)', input, now_ms)
$$;
CREATE FUNCTION pg_temp.del_input(thread text, id text, writer json DEFAULT NULL) RETURNS text
LANGUAGE sql AS $$
    SELECT json_build_object('threadId', thread, 'checkpointId', id, 'writer', coalesce(writer, pg_temp.w()))::text
$$;
CREATE FUNCTION pg_temp.writer_with(changes jsonb) RETURNS json LANGUAGE sql AS $$
    SELECT (pg_temp.w()::jsonb || changes)::json
$$;

------------------------------------------------------------------------------
-- Baseline: thread-a has root 1 (with a file and an artifact); thread-b has a
-- lease; the baseline append of 2 is accepted.
------------------------------------------------------------------------------
SELECT sandbox_persist.checkpoint_append(pg_temp.input(pg_temp.cp('1', NULL), NULL), '[{"role":"user","content":"1"}]');
SELECT pg_temp.w('thread-b');
SELECT is(pg_temp.try(pg_temp.qa(pg_temp.base())), 'accepted',
    'C8.0 the baseline append (every rejection below differs from it in one field) is accepted');

------------------------------------------------------------------------------
-- C8: lone surrogate in the checkpoint id and in a file key.
------------------------------------------------------------------------------
SELECT * FROM pg_temp.rejects(pg_temp.qsub(pg_temp.base() || '{"id": "@X@"}', '"\ud800"'),
    pg_temp.e('INVALID_ID'), 'C8.1 checkpoint id \uD800');
SELECT * FROM pg_temp.rejects(pg_temp.qsub(pg_temp.with_files(pg_temp.f('a.txt', '@X@')),
        '"sandbox-files/sha256/\ud800' || repeat('0', 63) || '"'),
    pg_temp.e('INVALID_ENTRY'), 'C8.2 a file key containing \uD800');

------------------------------------------------------------------------------
-- C9-C11: NaN and +-Infinity arrive as JSON null; other non-finite spellings.
------------------------------------------------------------------------------
SELECT * FROM pg_temp.rejects(pg_temp.qa(pg_temp.base() || '{"createdAt": null}'),
    pg_temp.e('INVALID_ENTRY'), 'C9.1 createdAt NaN (JSON null)');
SELECT * FROM pg_temp.rejects(pg_temp.qa(pg_temp.base() || '{"createdAt": "NaN"}'),
    pg_temp.e('INVALID_ENTRY'), 'C9.2 createdAt as the string "NaN"');
SELECT * FROM pg_temp.rejects(pg_temp.qa(pg_temp.base() - 'createdAt'),
    pg_temp.e('INVALID_ENTRY'), 'C9.3 createdAt absent');
SELECT * FROM pg_temp.rejects(pg_temp.qa(pg_temp.base() || '{"createdAt": null}', '1', pg_temp.w('thread-b')),
    pg_temp.e('WRITER_LOST'), 'C9.4 the writer-thread mismatch precedes the createdAt check');
SELECT * FROM pg_temp.rejects(pg_temp.qa(pg_temp.base() || '{"createdAt": null}', '1',
        pg_temp.writer_with('{"ownerToken": "00000000-0000-0000-0000-000000000000"}')),
    pg_temp.e('INVALID_ENTRY'), 'C9.5 createdAt null with a non-current lease: validation precedes the lease check');
SELECT * FROM pg_temp.rejects(pg_temp.qa(pg_temp.base() || '{"createdAt": null}'),
    pg_temp.e('INVALID_ENTRY'), 'C10.1 createdAt Infinity (JSON null)');
SELECT * FROM pg_temp.rejects(pg_temp.qsub(pg_temp.base() || '{"createdAt": "@X@"}', '1e400'),
    pg_temp.e('INVALID_ENTRY'), 'C10.2 createdAt 1e400 (not a finite float8)');
SELECT * FROM pg_temp.rejects(pg_temp.qa(pg_temp.base() || '{"createdAt": null}'),
    pg_temp.e('INVALID_ENTRY'), 'C11.1 createdAt -Infinity (JSON null)');
SELECT * FROM pg_temp.rejects(pg_temp.qsub(pg_temp.base() || '{"createdAt": "@X@"}', '-1e400'),
    pg_temp.e('INVALID_ENTRY'), 'C11.2 createdAt -1e400 (not a finite float8)');

------------------------------------------------------------------------------
-- C4 (check order): the lease is checked before the duplicate id.
------------------------------------------------------------------------------
SELECT * FROM pg_temp.rejects(pg_temp.qa(pg_temp.cp('1', '1'), '1',
        pg_temp.writer_with('{"fence": 99}')),
    pg_temp.e('WRITER_LOST'), 'C4.4 a duplicate id with a non-current writer');

------------------------------------------------------------------------------
-- S4-S15: structure of files and artifacts.
------------------------------------------------------------------------------
SELECT * FROM pg_temp.rejects(pg_temp.qa(pg_temp.with_files(pg_temp.f('a.txt'), pg_temp.f('a.txt/b.txt'))),
    pg_temp.e('INVALID_ENTRY'), 'S4 a file entry beneath another file entry');
SELECT * FROM pg_temp.rejects(pg_temp.qa(pg_temp.with_files(pg_temp.f('C:/absolute.txt'))),
    pg_temp.e('INVALID_ENTRY'), 'S5 path C:/absolute.txt');
SELECT * FROM pg_temp.rejects(pg_temp.qa(pg_temp.with_files(pg_temp.d('x') || '{"kind": "other"}')),
    pg_temp.e('INVALID_ENTRY'), 'S6 entry kind other');
SELECT * FROM pg_temp.rejects(pg_temp.qa(pg_temp.with_files(pg_temp.d('x') || jsonb_build_object('blobKey', pg_temp.fkey('2')))),
    pg_temp.e('INVALID_ENTRY'), 'S7 a directory entry with a blobKey');
SELECT * FROM pg_temp.rejects(pg_temp.qa(pg_temp.base() || '{"files": null}'),
    pg_temp.e('INVALID_ENTRY'), 'S8.1 files: null');
SELECT * FROM pg_temp.rejects(pg_temp.qa(pg_temp.base() - 'files'),
    pg_temp.e('INVALID_ENTRY'), 'S8.2 files absent');
SELECT * FROM pg_temp.rejects(pg_temp.qa(pg_temp.base() || '{"files": "not-an-array"}'),
    pg_temp.e('INVALID_ENTRY'), 'S9 files: "not-an-array"');
SELECT * FROM pg_temp.rejects(pg_temp.qa(pg_temp.base() || '{"files": [null]}'),
    pg_temp.e('INVALID_ENTRY'), 'S10 files: [null]');
SELECT * FROM pg_temp.rejects(pg_temp.qa(pg_temp.base() || '{"files": [1]}'),
    pg_temp.e('INVALID_ENTRY'), 'S11 files: [1]');
SELECT * FROM pg_temp.rejects(pg_temp.qa(pg_temp.base() || '{"artifacts": null}'),
    pg_temp.e('INVALID_ENTRY'), 'S12.1 artifacts: null');
SELECT * FROM pg_temp.rejects(pg_temp.qa(pg_temp.base() - 'artifacts'),
    pg_temp.e('INVALID_ENTRY'), 'S12.2 artifacts absent');
SELECT * FROM pg_temp.rejects(pg_temp.qa(pg_temp.base() || '{"artifacts": "not-an-array"}'),
    pg_temp.e('INVALID_ENTRY'), 'S13 artifacts: "not-an-array"');
SELECT * FROM pg_temp.rejects(pg_temp.qa(pg_temp.base() || '{"artifacts": [null]}'),
    pg_temp.e('INVALID_ENTRY'), 'S14 artifacts: [null]');
SELECT * FROM pg_temp.rejects(pg_temp.qa(pg_temp.base() || '{"artifacts": [1]}'),
    pg_temp.e('INVALID_ENTRY'), 'S15 artifacts: [1]');

------------------------------------------------------------------------------
-- R17: file and directory members.
------------------------------------------------------------------------------
SELECT * FROM pg_temp.rejects(pg_temp.qa(pg_temp.with_files(pg_temp.f('a.txt') - 'size')),
    pg_temp.e('INVALID_ENTRY'), 'R17.1 a file without size');
SELECT * FROM pg_temp.rejects(pg_temp.qa(pg_temp.with_files(pg_temp.f('a.txt') || '{"size": 1.5}')),
    pg_temp.e('INVALID_ENTRY'), 'R17.2 a file with size 1.5');
SELECT * FROM pg_temp.rejects(pg_temp.qa(pg_temp.with_files(pg_temp.f('a.txt') - 'blobKey')),
    pg_temp.e('INVALID_ENTRY'), 'R17.3 a file without blobKey');
SELECT * FROM pg_temp.rejects(pg_temp.qa(pg_temp.with_files(pg_temp.d('x') || jsonb_build_object('blobKey', pg_temp.fkey('2'), 'size', 1))),
    pg_temp.e('INVALID_ENTRY'), 'R17.4 a directory with a blobKey (and size)');
SELECT * FROM pg_temp.rejects(pg_temp.qa(pg_temp.with_files(pg_temp.d('x') || '{"blobKey": null}')),
    pg_temp.e('INVALID_ENTRY'), 'R17.5 a directory with an own blobKey that is undefined (JSON null)');
SELECT * FROM pg_temp.rejects(pg_temp.qa(pg_temp.with_files(pg_temp.d('x') || '{"size": null}')),
    pg_temp.e('INVALID_ENTRY'), 'R17.6 a directory with an own size that is undefined (JSON null)');
SELECT * FROM pg_temp.rejects(pg_temp.qa(pg_temp.with_files(pg_temp.d('x') || '{"size": 0}')),
    pg_temp.e('INVALID_ENTRY'), 'R17.7 a directory with size 0');
SELECT * FROM pg_temp.rejects(pg_temp.qa(pg_temp.with_files(pg_temp.f('a.txt') || '{"size": null}')),
    pg_temp.e('INVALID_ENTRY'), 'R17.8 a file with size null');
SELECT * FROM pg_temp.rejects(pg_temp.qa(pg_temp.with_files(pg_temp.f('a.txt') || '{"size": "1"}')),
    pg_temp.e('INVALID_ENTRY'), 'R17.9 a file with size "1" (a string)');
SELECT * FROM pg_temp.rejects(pg_temp.qa(pg_temp.with_files(pg_temp.f('a.txt') || '{"size": -1}')),
    pg_temp.e('INVALID_ENTRY'), 'R17.10 a file with size -1 (V11: negative entry size -> SP008)');
SELECT * FROM pg_temp.rejects(pg_temp.qa(pg_temp.with_files(pg_temp.f('a.txt') || '{"size": 9007199254740992}')),
    pg_temp.e('INVALID_ENTRY'), 'R17.11 a file with size 2^53 (not a safe integer)');
SELECT * FROM pg_temp.rejects(pg_temp.qa(pg_temp.with_files(pg_temp.f('a.txt') || '{"size": 1e300}')),
    pg_temp.e('INVALID_ENTRY'), 'R17.12 a file with size 1e300');
SELECT * FROM pg_temp.rejects(pg_temp.qa(pg_temp.with_files(pg_temp.f('a.txt') - 'kind')),
    pg_temp.e('INVALID_ENTRY'), 'R17.13 an entry without kind');
SELECT is(pg_temp.try(pg_temp.qa(pg_temp.with_files(pg_temp.f('a.txt') || '{"size": 9007199254740991}'))), 'accepted',
    'R17.14 size 2^53 - 1 is accepted');
SELECT is(pg_temp.try(pg_temp.qa(pg_temp.with_files(pg_temp.f('a.txt') || '{"size": 0}'))), 'accepted',
    'R17.15 size 0 is accepted');
SELECT is(pg_temp.try(pg_temp.qa(pg_temp.with_files(pg_temp.f('a.txt') || '{"size": 1.0}', pg_temp.f('b.txt') || '{"size": 1e2}'))),
    'accepted', 'R17.16 integral sizes spelled 1.0 and 1e2 are safe integers and accepted');

------------------------------------------------------------------------------
-- R18: unsafe paths.
------------------------------------------------------------------------------
SELECT * FROM pg_temp.rejects(pg_temp.qsub(pg_temp.with_files(pg_temp.f('@X@')), '"bad\u0000name"'),
    pg_temp.e('INVALID_ENTRY'), 'R18.1 path bad\0name');
SELECT pg_temp.rejects(pg_temp.qa(pg_temp.with_files(pg_temp.f(p))), pg_temp.e('INVALID_ENTRY'),
        format('R18.%s path %s', n + 1, CASE p WHEN '' THEN '''''' ELSE p END))
    FROM unnest(ARRAY['nested/../bad', 'nested//bad', '/absolute', 'C:/absolute', '/absolute.txt',
                      E'\\absolute.txt', '../outside.txt', 'nested/../../outside.txt', 'nested//file.txt',
                      './file.txt', 'nested/', '']) WITH ORDINALITY AS t(p, n);
-- The rule beyond the listed examples: backslash anywhere, a drive letter
-- alone, . and .. segments anywhere.
SELECT pg_temp.rejects(pg_temp.qa(pg_temp.with_files(pg_temp.f(p))), pg_temp.e('INVALID_ENTRY'),
        format('R18.%s path %s', n + 13, p))
    FROM unnest(ARRAY[E'nested\\file.txt', 'C:', 'z:/x', '.', '..', 'nested/.', 'nested/..', 'a/./b'])
         WITH ORDINALITY AS t(p, n);
SELECT * FROM pg_temp.rejects(pg_temp.qa(pg_temp.with_files(pg_temp.d('dir/'))),
    pg_temp.e('INVALID_ENTRY'), 'R18.22 a directory path with a trailing /');
SELECT * FROM pg_temp.rejects(pg_temp.qa(pg_temp.with_files(pg_temp.f('a.txt') || '{"path": 7}')),
    pg_temp.e('INVALID_ENTRY'), 'R18.23 a path that is not a string');
SELECT * FROM pg_temp.rejects(pg_temp.qa(pg_temp.with_files(pg_temp.f('a.txt') - 'path')),
    pg_temp.e('INVALID_ENTRY'), 'R18.24 an entry without path');

------------------------------------------------------------------------------
-- R19: file keys.
------------------------------------------------------------------------------
SELECT pg_temp.rejects(pg_temp.qa(pg_temp.with_files(pg_temp.f('a.txt', k))), pg_temp.e('INVALID_ENTRY'),
        format('R19.%s file key %s', n, d))
    FROM (VALUES (1, 'bad', 'bad'),
                 (2, 'sandbox-files/sha256/not-hex', 'sandbox-files/sha256/not-hex'),
                 (3, 'sandbox-files/sha256/' || repeat('a', 63), 'with 63 hex digits'),
                 (4, 'sandbox-files/sha256/' || repeat('A', 64), 'with upper-case hex'),
                 (5, 'sandbox-files/sha256/' || repeat('a', 65), 'with 65 hex digits'),
                 (6, 'sandbox-artifacts/sha256/' || repeat('a', 64), 'with the artifact prefix'),
                 (7, '/sandbox-files/sha256/' || repeat('a', 64), 'with a leading /'),
                 (8, 'sandbox-files/sha256/' || repeat('a', 63) || 'g', 'with a non-hex last digit'))
         AS t(n, k, d);
SELECT * FROM pg_temp.rejects(pg_temp.qa(pg_temp.with_files(pg_temp.f('a.txt') || '{"blobKey": 7}')),
    pg_temp.e('INVALID_ENTRY'), 'R19.9 a file key that is not a string');

------------------------------------------------------------------------------
-- R20: repeated paths and files with descendants.
------------------------------------------------------------------------------
SELECT * FROM pg_temp.rejects(pg_temp.qa(pg_temp.with_files(pg_temp.f('same'), pg_temp.d('same'))),
    pg_temp.e('INVALID_ENTRY'), 'R20.1 the same path as file and dir');
SELECT * FROM pg_temp.rejects(pg_temp.qa(pg_temp.with_files(pg_temp.f('a'), pg_temp.f('a/child.txt'))),
    pg_temp.e('INVALID_ENTRY'), 'R20.2 a file then its child');
SELECT * FROM pg_temp.rejects(pg_temp.qa(pg_temp.with_files(pg_temp.f('a/child.txt'), pg_temp.f('a'))),
    pg_temp.e('INVALID_ENTRY'), 'R20.3 a child then its file-ancestor');
SELECT * FROM pg_temp.rejects(pg_temp.qa(pg_temp.with_files(pg_temp.d('same'), pg_temp.d('same'))),
    pg_temp.e('INVALID_ENTRY'), 'R20.4 the same directory twice');
SELECT * FROM pg_temp.rejects(pg_temp.qa(pg_temp.with_files(pg_temp.f('same'), pg_temp.f('same'))),
    pg_temp.e('INVALID_ENTRY'), 'R20.5 the same file twice');
SELECT * FROM pg_temp.rejects(pg_temp.qa(pg_temp.with_files(pg_temp.d('a/b/c'), pg_temp.f('x.txt'), pg_temp.f('a'))),
    pg_temp.e('INVALID_ENTRY'), 'R20.6 a file that is a deeper ancestor of an earlier dir');
SELECT * FROM pg_temp.rejects(pg_temp.qa(pg_temp.with_files(pg_temp.f('a'), pg_temp.f('a-b'), pg_temp.f('a.c'), pg_temp.d('a/b/c'))),
    pg_temp.e('INVALID_ENTRY'), 'R20.7 an entry beneath a file, with siblings sorting between them');
SELECT is(pg_temp.try(pg_temp.qa(pg_temp.with_files(pg_temp.d('d'), pg_temp.f('d/x.txt'), pg_temp.d('d/sub'),
        pg_temp.f('p/q/r.txt'), pg_temp.f('a'), pg_temp.f('a.txt'), pg_temp.f('a-b/c'), pg_temp.f('ab/c')))),
    'accepted', 'R20.8 dirs with children, undeclared ancestors and prefix-sharing siblings are accepted');

------------------------------------------------------------------------------
-- R21: checkpoint artifacts.
------------------------------------------------------------------------------
SELECT * FROM pg_temp.rejects(pg_temp.qa(pg_temp.with_art(pg_temp.art() || '{"artifactId": ""}')),
    pg_temp.e('INVALID_ENTRY'), 'R21.1 an artifact with an empty id');
SELECT pg_temp.rejects(pg_temp.qa(pg_temp.with_art(pg_temp.art() || jsonb_build_object('blobKey', k))),
        pg_temp.e('INVALID_ENTRY'), format('R21.%s an artifact key %s', n + 1, d))
    FROM (VALUES (1, 'artifacts/run-1/art-1', 'artifacts/run-1/art-1 (a source key)'),
                 (2, pg_temp.fkey('a'), 'with the file prefix'),
                 (3, 'sandbox-artifacts/sha256/' || repeat('a', 63), 'with 63 hex digits'),
                 (4, 'sandbox-artifacts/sha256/' || repeat('A', 64), 'with upper-case hex'))
         AS t(n, k, d);
SELECT pg_temp.rejects(pg_temp.qa(pg_temp.with_art(pg_temp.art() || v)), pg_temp.e('INVALID_ENTRY'),
        format('R21.%s an artifact with %s', n + 5, v))
    FROM (VALUES (1, '{"name": ""}'::jsonb), (2, '{"mimeType": ""}'), (3, '{"size": 1.5}'),
                 (4, '{"size": -1}'), (5, '{"size": 9007199254740992}'), (6, '{"createdAt": null}'),
                 (7, '{"createdAt": "1"}'), (8, '{"name": 7}'), (9, '{"artifactId": 7}'),
                 (10, '{"blobKey": null}'))
         AS t(n, v);
SELECT pg_temp.rejects(pg_temp.qa(pg_temp.with_art(pg_temp.art() - k)), pg_temp.e('INVALID_ENTRY'),
        format('R21.%s an artifact without %s', n + 15, k))
    FROM unnest(ARRAY['artifactId', 'name', 'mimeType', 'size', 'blobKey', 'createdAt']) WITH ORDINALITY AS t(k, n);
SELECT is(pg_temp.try(pg_temp.qa(pg_temp.base() || jsonb_build_object('artifacts',
        jsonb_build_array(pg_temp.art(), pg_temp.art() || jsonb_build_object('blobKey', pg_temp.akey('b')))))),
    'accepted', 'R21.22 duplicate artifactIds are not rejected');

------------------------------------------------------------------------------
-- R23: lease duration.
------------------------------------------------------------------------------
SELECT * FROM pg_temp.rejects('SELECT sandbox_persist.checkpoint_acquire_writer(''thread-c'', 0)', '22023',
    'R23.1 acquire with lease_ms 0');
SELECT * FROM pg_temp.rejects('SELECT sandbox_persist.checkpoint_acquire_writer(''thread-c'', -1)', '22023',
    'R23.2 acquire with lease_ms -1');
SELECT * FROM pg_temp.rejects(format('SELECT sandbox_persist.checkpoint_renew_writer(%L::json, 0)', pg_temp.w()),
    '22023', 'R23.3 renew with lease_ms 0');
SELECT is(pg_temp.try('SELECT sandbox_persist.checkpoint_acquire_writer(''thread-c'', 1)'), 'accepted',
    'R23.4 lease_ms 1 is accepted');

------------------------------------------------------------------------------
-- V1-V4: malformed JSON, wrong shapes, wrong types, SQL NULL.
------------------------------------------------------------------------------
SELECT * FROM pg_temp.rejects(pg_temp.q('{"checkpoint": '), '22P02', 'V1.1 malformed append input');
SELECT * FROM pg_temp.rejects(pg_temp.q(pg_temp.input(pg_temp.base())::text, '[{"role":'), '22P02',
    'V1.2 malformed conversation');
SELECT * FROM pg_temp.rejects('SELECT sandbox_persist.checkpoint_renew_writer(''{"threadId"'')', '22P02',
    'V1.3 malformed writer');
SELECT * FROM pg_temp.rejects(pg_temp.q('[]'), pg_temp.e('INVALID_ID'), 'V2.1 append input given as an array');
SELECT * FROM pg_temp.rejects(pg_temp.q(json_build_object('checkpoint', 'x', 'expectedHeadId', '1', 'writer', pg_temp.w())::text),
    pg_temp.e('INVALID_ID'), 'V2.2 a checkpoint that is not an object has no identifiers');
SELECT * FROM pg_temp.rejects(pg_temp.qa(pg_temp.base() || '{"id": 7}'), pg_temp.e('INVALID_ID'),
    'V3.1 checkpoint id 7 (a number)');
SELECT * FROM pg_temp.rejects(pg_temp.qa(pg_temp.base() || '{"parentCheckpointId": 1}'), pg_temp.e('INVALID_ID'),
    'V3.2 parentCheckpointId 1 (a number)');
SELECT * FROM pg_temp.rejects(pg_temp.q(json_build_object('checkpoint', pg_temp.base()::json, 'expectedHeadId', 1,
        'writer', pg_temp.w())::text), pg_temp.e('INVALID_ID'), 'V3.3 expectedHeadId 1 (a number)');
SELECT * FROM pg_temp.rejects(pg_temp.qa(pg_temp.base(), '1', pg_temp.writer_with('{"threadId": 7}')),
    pg_temp.e('INVALID_ID'), 'V3.4 writer.threadId 7 (a number)');
SELECT * FROM pg_temp.rejects(pg_temp.q(json_build_object('checkpoint', pg_temp.base()::json, 'expectedHeadId', '1',
        'writer', 'thread-a')::text), pg_temp.e('INVALID_ID'), 'V3.5 a writer that is not an object');
SELECT * FROM pg_temp.rejects(pg_temp.q(json_build_object('checkpoint', pg_temp.base()::json, 'expectedHeadId', '1')::text),
    pg_temp.e('INVALID_ID'), 'V3.6 no writer');
SELECT * FROM pg_temp.rejects(pg_temp.qa(pg_temp.base(), '1', pg_temp.writer_with('{"fence": "1"}')),
    pg_temp.e('WRITER_LOST'), 'V3.7 writer.fence "1" (a string) is simply not current');
SELECT * FROM pg_temp.rejects(pg_temp.qa(pg_temp.base(), '1', pg_temp.writer_with('{"ownerToken": 7}')),
    pg_temp.e('WRITER_LOST'), 'V3.8 writer.ownerToken 7 (a number) is simply not current');
SELECT * FROM pg_temp.rejects(pg_temp.qa(pg_temp.base(), '1', (pg_temp.w()::jsonb - 'ownerToken')::json),
    pg_temp.e('WRITER_LOST'), 'V3.9 a writer without ownerToken');
SELECT * FROM pg_temp.rejects(pg_temp.qa(pg_temp.base(), '1', (pg_temp.w()::jsonb - 'fence')::json),
    pg_temp.e('WRITER_LOST'), 'V3.10 a writer without fence');
SELECT * FROM pg_temp.rejects(pg_temp.qa(pg_temp.base(), '1', pg_temp.writer_with('{"fence": 1.5}')),
    pg_temp.e('WRITER_LOST'), 'V3.11 writer.fence 1.5');
SELECT * FROM pg_temp.rejects(pg_temp.qa(pg_temp.base() || '{"reason": 7}'), pg_temp.e('INVALID_ENTRY'),
    'V3.12 reason 7 (a number)');
SELECT * FROM pg_temp.rejects(pg_temp.qa(pg_temp.base() - 'reason'), pg_temp.e('INVALID_ENTRY'),
    'V3.13 reason absent');
SELECT * FROM pg_temp.rejects(pg_temp.qa(pg_temp.base() || '{"label": 7}'), pg_temp.e('INVALID_ENTRY'),
    'V3.14 label 7 (a number)');
SELECT * FROM pg_temp.rejects(pg_temp.qa(pg_temp.base() || '{"sourceRunId": true}'), pg_temp.e('INVALID_ENTRY'),
    'V3.15 sourceRunId true');
SELECT * FROM pg_temp.rejects(pg_temp.qa(pg_temp.with_files(pg_temp.f('a.txt') || '{"kind": 1}')),
    pg_temp.e('INVALID_ENTRY'), 'V3.16 kind 1 (a number)');

SELECT pg_temp.rejects(s, pg_temp.e('INVALID_ID'), format('V4.%s %s', n, d))
    FROM (VALUES
        (1, 'SELECT sandbox_persist.checkpoint_get(NULL)', 'checkpoint_get(NULL)'),
        (2, 'SELECT sandbox_persist.checkpoint_list(NULL)', 'checkpoint_list(NULL)'),
        (3, 'SELECT sandbox_persist.checkpoint_get_head(NULL)', 'checkpoint_get_head(NULL)'),
        (4, 'SELECT sandbox_persist.checkpoint_acquire_writer(NULL)', 'checkpoint_acquire_writer(NULL)'),
        (5, 'SELECT sandbox_persist.checkpoint_append(NULL, ''[]'')', 'checkpoint_append(NULL, conversation)'),
        (6, 'SELECT sandbox_persist.checkpoint_delete_head(NULL)', 'checkpoint_delete_head(NULL)'),
        (7, 'SELECT sandbox_persist.checkpoint_renew_writer(NULL)', 'checkpoint_renew_writer(NULL)'),
        (8, 'SELECT sandbox_persist.checkpoint_release_writer(NULL)', 'checkpoint_release_writer(NULL)'),
        (9, 'SELECT sandbox_persist.checkpoint_get_parts(NULL)', 'checkpoint_get_parts(NULL)'))
    AS t(n, s, d);

------------------------------------------------------------------------------
-- V6: unknown keys (INVALID_ENTRY inside checkpoint input).
------------------------------------------------------------------------------
SELECT * FROM pg_temp.rejects(pg_temp.qa(pg_temp.base() || '{"extra": 1}'), pg_temp.e('INVALID_ENTRY'),
    'V6.1 an unknown key in the checkpoint');
SELECT * FROM pg_temp.rejects(pg_temp.qa(pg_temp.base() || '{"extra": null}'), pg_temp.e('INVALID_ENTRY'),
    'V6.2 an unknown key in the checkpoint, even with value null');
SELECT * FROM pg_temp.rejects(pg_temp.qa(pg_temp.with_files(pg_temp.f('a.txt') || '{"mode": 420}')),
    pg_temp.e('INVALID_ENTRY'), 'V6.3 an unknown key in a file entry');
SELECT * FROM pg_temp.rejects(pg_temp.qa(pg_temp.with_files(pg_temp.d('x') || '{"mode": 493}')),
    pg_temp.e('INVALID_ENTRY'), 'V6.4 an unknown key in a dir entry');
SELECT * FROM pg_temp.rejects(pg_temp.qa(pg_temp.with_art(pg_temp.art() || '{"runId": "run-1"}')),
    pg_temp.e('INVALID_ENTRY'), 'V6.5 an unknown key in an artifact');
SELECT * FROM pg_temp.rejects(pg_temp.q((pg_temp.input(pg_temp.base())::jsonb || '{"extra": 1}')::text),
    pg_temp.e('INVALID_ENTRY'), 'V6.6 an unknown key in the append input');
SELECT * FROM pg_temp.rejects(pg_temp.qdel((pg_temp.del_input('thread-a', '1')::jsonb || '{"extra": 1}')::text),
    pg_temp.e('INVALID_ENTRY'), 'V6.7 an unknown key in the deleteHead input');
-- Unknown checkpoint keys are INVALID_ENTRY, which comes after the identifier
-- checks and the writer-thread check (docs/contract/checkpoint-store.md §4,
-- docs/contract/README.md §4.2).
SELECT * FROM pg_temp.rejects(pg_temp.qa(pg_temp.base() || '{"extra": 1, "id": ""}'), pg_temp.e('INVALID_ID'),
    'V6.8 an unknown checkpoint key with an empty id: identifiers are checked first');
SELECT * FROM pg_temp.rejects(pg_temp.qa(pg_temp.base() || '{"extra": 1}', '1', pg_temp.w('thread-b')),
    pg_temp.e('WRITER_LOST'), 'V6.9 an unknown checkpoint key with a writer of another thread: the mismatch comes first');
SELECT * FROM pg_temp.rejects(pg_temp.qa(pg_temp.with_files(pg_temp.f('a.txt') || '{"mode": 420}'), '1', pg_temp.w('thread-b')),
    pg_temp.e('WRITER_LOST'), 'V6.10 an unknown entry key with a writer of another thread: the mismatch comes first');
SELECT is(pg_temp.try(pg_temp.qa(pg_temp.base(), '1', pg_temp.writer_with(
        '{"renewAfterMs": 45000, "renew": null, "release": {}, "extra": [1]}'))), 'accepted',
    'C2.8 a writer with extra members (a whole lease) is accepted for append');
SELECT is(pg_temp.try(pg_temp.qdel(pg_temp.del_input('thread-a', '1', pg_temp.writer_with(
        '{"renewAfterMs": 45000, "renew": null}')))), 'accepted',
    'C2.9 a writer with extra members is accepted for deleteHead');
SELECT is(pg_temp.try(format('SELECT sandbox_persist.checkpoint_renew_writer(%L::json)',
        pg_temp.writer_with('{"renewAfterMs": 45000, "expiresAt": "whatever"}'))), 'accepted',
    'C2.10 a writer with extra members is accepted for renew');
SELECT is(pg_temp.try(format('SELECT 1 / sandbox_persist.checkpoint_release_writer(%L::json)::int',
        pg_temp.writer_with('{"renewAfterMs": 45000}'))), 'accepted',
    'C2.11 a writer with extra members is accepted (and releases) for release');

------------------------------------------------------------------------------
-- V13: U+0000 in identifiers (SP007) and in paths, labels and other stored
-- strings (SP008).
------------------------------------------------------------------------------
SELECT * FROM pg_temp.rejects(pg_temp.qsub(pg_temp.base() || '{"id": "@X@"}', '"a\u0000b"'),
    pg_temp.e('INVALID_ID'), 'V13.1 checkpoint id with \u0000');
SELECT * FROM pg_temp.rejects(pg_temp.qsub(pg_temp.base() || '{"threadId": "@X@"}', '"thread-a\u0000"',
        '1', pg_temp.writer_with('{"threadId": "@X@"}')),
    pg_temp.e('INVALID_ID'), 'V13.2 threadId (and writer.threadId) with \u0000');
SELECT * FROM pg_temp.rejects(pg_temp.qsub(pg_temp.base() || '{"parentCheckpointId": "@X@"}', '"1\u0000"'),
    pg_temp.e('INVALID_ID'), 'V13.3 parentCheckpointId with \u0000');
SELECT * FROM pg_temp.rejects(pg_temp.qsub(pg_temp.base(), '"1\u0000"', '@X@'),
    pg_temp.e('INVALID_ID'), 'V13.4 expectedHeadId with \u0000');
SELECT * FROM pg_temp.rejects(pg_temp.qsub(pg_temp.base(), '"thread-a\u0000"', '1', pg_temp.writer_with('{"threadId": "@X@"}')),
    pg_temp.e('INVALID_ID'), 'V13.5 writer.threadId with \u0000');
SELECT * FROM pg_temp.rejects(pg_temp.qdel(pg_temp.sub(pg_temp.del_input('@X@', '1'), '@X@', '"thread-a\u0000"')),
    pg_temp.e('INVALID_ID'), 'V13.6 deleteHead threadId with \u0000');
SELECT * FROM pg_temp.rejects(pg_temp.qdel(pg_temp.sub(pg_temp.del_input('thread-a', '@X@'), '@X@', '"1\u0000"')),
    pg_temp.e('INVALID_ID'), 'V13.7 deleteHead checkpointId with \u0000');
SELECT * FROM pg_temp.rejects(pg_temp.qsub(pg_temp.with_files(pg_temp.f('@X@')), '"a\u0000.txt"'),
    pg_temp.e('INVALID_ENTRY'), 'V13.8 a path with \u0000');
SELECT * FROM pg_temp.rejects(pg_temp.qsub(pg_temp.base() || '{"label": "@X@"}', '"v\u00001"'),
    pg_temp.e('INVALID_ENTRY'), 'V13.9 a label with \u0000');
SELECT * FROM pg_temp.rejects(pg_temp.qsub(pg_temp.base() || '{"sourceRunId": "@X@"}', '"run\u0000"'),
    pg_temp.e('INVALID_ENTRY'), 'V13.10 a sourceRunId with \u0000');
SELECT * FROM pg_temp.rejects(pg_temp.qsub(pg_temp.base() || '{"reason": "@X@"}', '"named\u0000"'),
    pg_temp.e('INVALID_ENTRY'), 'V13.11 a reason with \u0000');
SELECT * FROM pg_temp.rejects(pg_temp.qsub(pg_temp.with_art(pg_temp.art() || '{"name": "@X@"}'), '"r\u0000.txt"'),
    pg_temp.e('INVALID_ENTRY'), 'V13.12 an artifact name with \u0000');
SELECT * FROM pg_temp.rejects(pg_temp.qsub(pg_temp.with_art(pg_temp.art() || '{"artifactId": "@X@"}'), '"art\u0000"'),
    pg_temp.e('INVALID_ENTRY'), 'V13.13 an artifactId with \u0000');
SELECT * FROM pg_temp.rejects(pg_temp.qsub(pg_temp.with_art(pg_temp.art() || '{"mimeType": "@X@"}'), '"text/plain\u0000"'),
    pg_temp.e('INVALID_ENTRY'), 'V13.14 a mimeType with \u0000');

------------------------------------------------------------------------------
-- V14: lone surrogate escapes in identifiers (SP007) and entry fields (SP008).
------------------------------------------------------------------------------
SELECT * FROM pg_temp.rejects(pg_temp.qsub(pg_temp.base() || '{"id": "@X@"}', '"\udc00"'),
    pg_temp.e('INVALID_ID'), 'V14.1 checkpoint id with a lone low surrogate');
SELECT * FROM pg_temp.rejects(pg_temp.qsub(pg_temp.base() || '{"id": "@X@"}', '"\udc00\ud800"'),
    pg_temp.e('INVALID_ID'), 'V14.2 checkpoint id with a reversed surrogate pair');
SELECT * FROM pg_temp.rejects(pg_temp.qsub(pg_temp.base() || '{"id": "@X@"}', '"x\ud800y"'),
    pg_temp.e('INVALID_ID'), 'V14.3 checkpoint id with a high surrogate followed by a letter');
SELECT * FROM pg_temp.rejects(pg_temp.qsub(pg_temp.base() || '{"threadId": "@X@"}', '"thread-a\ud800"',
        '1', pg_temp.writer_with('{"threadId": "@X@"}')),
    pg_temp.e('INVALID_ID'), 'V14.4 threadId (and writer.threadId) with a lone surrogate');
SELECT * FROM pg_temp.rejects(pg_temp.qsub(pg_temp.base() || '{"parentCheckpointId": "@X@"}', '"\ud800"'),
    pg_temp.e('INVALID_ID'), 'V14.5 parentCheckpointId with a lone surrogate');
SELECT * FROM pg_temp.rejects(pg_temp.qsub(pg_temp.base(), '"\ud800"', '@X@'),
    pg_temp.e('INVALID_ID'), 'V14.6 expectedHeadId with a lone surrogate');
SELECT * FROM pg_temp.rejects(pg_temp.qsub(pg_temp.base(), '"thread-a\udfff"', '1', pg_temp.writer_with('{"threadId": "@X@"}')),
    pg_temp.e('INVALID_ID'), 'V14.7 writer.threadId with a lone surrogate');
SELECT * FROM pg_temp.rejects(pg_temp.qdel(pg_temp.sub(pg_temp.del_input('thread-a', '@X@'), '@X@', '"\ud800"')),
    pg_temp.e('INVALID_ID'), 'V14.8 deleteHead checkpointId with a lone surrogate');
SELECT * FROM pg_temp.rejects(pg_temp.qsub(pg_temp.with_files(pg_temp.f('@X@')), '"\ud800.txt"'),
    pg_temp.e('INVALID_ENTRY'), 'V14.9 a path with a lone surrogate');
SELECT * FROM pg_temp.rejects(pg_temp.qsub(pg_temp.base() || '{"label": "@X@"}', '"\ud800"'),
    pg_temp.e('INVALID_ENTRY'), 'V14.10 a label with a lone surrogate');
SELECT * FROM pg_temp.rejects(pg_temp.qsub(pg_temp.with_art(pg_temp.art() || '{"artifactId": "@X@"}'), '"\ud800"'),
    pg_temp.e('INVALID_ENTRY'), 'V14.11 an artifactId with a lone surrogate');
SELECT * FROM pg_temp.rejects(pg_temp.qsub(pg_temp.with_art(pg_temp.art() || '{"blobKey": "@X@"}'),
        '"sandbox-artifacts/sha256/\ud800' || repeat('0', 63) || '"'),
    pg_temp.e('INVALID_ENTRY'), 'V14.12 an artifact key with a lone surrogate');

------------------------------------------------------------------------------
-- V15: identifiers over 1024 UTF-8 bytes.
------------------------------------------------------------------------------
SELECT * FROM pg_temp.rejects(pg_temp.qa(pg_temp.base() || jsonb_build_object('id', repeat('x', 1025))),
    pg_temp.e('INVALID_ID'), 'V15.1 a 1025-byte checkpoint id');
SELECT * FROM pg_temp.rejects(pg_temp.qa(pg_temp.base() || jsonb_build_object('id', repeat('é', 512) || 'x')),
    pg_temp.e('INVALID_ID'), 'V15.2 a checkpoint id of 513 characters but 1025 UTF-8 bytes');
SELECT is(pg_temp.try(pg_temp.qa(pg_temp.base() || jsonb_build_object('id', repeat('é', 512)))), 'accepted',
    'V15.3 a checkpoint id of exactly 1024 UTF-8 bytes is accepted');
SELECT * FROM pg_temp.rejects(pg_temp.qsub(pg_temp.base() || '{"id": "@X@"}', '"' || repeat('\u00e9', 512) || 'x"'),
    pg_temp.e('INVALID_ID'), 'V15.4 a 1025-byte checkpoint id written with escapes');
SELECT * FROM pg_temp.rejects(pg_temp.qa(pg_temp.base() || jsonb_build_object('parentCheckpointId', repeat('x', 1025))),
    pg_temp.e('INVALID_ID'), 'V15.5 a 1025-byte parentCheckpointId');
SELECT * FROM pg_temp.rejects(pg_temp.qa(pg_temp.base(), repeat('x', 1025)),
    pg_temp.e('INVALID_ID'), 'V15.6 a 1025-byte expectedHeadId');
SELECT * FROM pg_temp.rejects(format('SELECT sandbox_persist.checkpoint_get(%L)', repeat('x', 1025)),
    pg_temp.e('INVALID_ID'), 'V15.7 checkpoint_get of a 1025-byte id');
SELECT * FROM pg_temp.rejects(format('SELECT sandbox_persist.checkpoint_list(%L)', repeat('x', 1025)),
    pg_temp.e('INVALID_ID'), 'V15.8 checkpoint_list of a 1025-byte thread id');
SELECT * FROM pg_temp.rejects(format('SELECT sandbox_persist.checkpoint_get_head(%L)', repeat('x', 1025)),
    pg_temp.e('INVALID_ID'), 'V15.9 checkpoint_get_head of a 1025-byte thread id');
SELECT * FROM pg_temp.rejects(format('SELECT sandbox_persist.checkpoint_acquire_writer(%L)', repeat('x', 1025)),
    pg_temp.e('INVALID_ID'), 'V15.10 acquire of a 1025-byte thread id');
SELECT * FROM pg_temp.rejects(pg_temp.qdel(pg_temp.del_input('thread-a', repeat('x', 1025))),
    pg_temp.e('INVALID_ID'), 'V15.11 deleteHead of a 1025-byte checkpoint id');
SELECT * FROM pg_temp.rejects(format('SELECT sandbox_persist.checkpoint_get_parts(%L)', repeat('x', 1025)),
    pg_temp.e('INVALID_ID'), 'V15.12 checkpoint_get_parts of a 1025-byte id');

------------------------------------------------------------------------------
-- V16: empty identifiers.
------------------------------------------------------------------------------
SELECT pg_temp.rejects(s, pg_temp.e('INVALID_ID'), format('V16.%s %s', n, d))
    FROM (VALUES
        (1, 'SELECT sandbox_persist.checkpoint_get('''')', 'checkpoint_get('''')'),
        (2, 'SELECT sandbox_persist.checkpoint_list('''')', 'checkpoint_list('''')'),
        (3, 'SELECT sandbox_persist.checkpoint_get_head('''')', 'checkpoint_get_head('''')'),
        (4, 'SELECT sandbox_persist.checkpoint_acquire_writer('''')', 'checkpoint_acquire_writer('''')'))
    AS t(n, s, d);
SELECT * FROM pg_temp.rejects(pg_temp.qa(pg_temp.base() || '{"threadId": ""}', '1', pg_temp.writer_with('{"threadId": ""}')),
    pg_temp.e('INVALID_ID'), 'V16.5 an empty threadId (writer of the same empty thread)');
SELECT * FROM pg_temp.rejects(pg_temp.qa(pg_temp.base(), '1', pg_temp.writer_with('{"threadId": ""}')),
    pg_temp.e('INVALID_ID'), 'V16.6 an empty writer.threadId');
SELECT * FROM pg_temp.rejects(pg_temp.qa(pg_temp.base() || '{"id": ""}', '1', pg_temp.w('thread-b')),
    pg_temp.e('INVALID_ID'), 'V16.7 an empty id is reported before the writer-thread mismatch');
SELECT * FROM pg_temp.rejects(pg_temp.qdel(pg_temp.del_input('', '1')),
    pg_temp.e('INVALID_ID'), 'V16.8 deleteHead with an empty threadId');
SELECT * FROM pg_temp.rejects(pg_temp.qdel(pg_temp.del_input('thread-a', '')),
    pg_temp.e('INVALID_ID'), 'V16.9 deleteHead with an empty checkpointId');
SELECT * FROM pg_temp.rejects(pg_temp.qdel(pg_temp.del_input('thread-a', '1', pg_temp.writer_with('{"threadId": ""}'))),
    pg_temp.e('INVALID_ID'), 'V16.10 deleteHead with an empty writer.threadId');
SELECT * FROM pg_temp.rejects(format('SELECT sandbox_persist.checkpoint_renew_writer(%L::json)', pg_temp.writer_with('{"threadId": ""}')),
    pg_temp.e('INVALID_ID'), 'V16.11 renew with an empty writer.threadId');
SELECT * FROM pg_temp.rejects(format('SELECT sandbox_persist.checkpoint_release_writer(%L::json)', pg_temp.writer_with('{"threadId": ""}')),
    pg_temp.e('INVALID_ID'), 'V16.12 release with an empty writer.threadId');

------------------------------------------------------------------------------
-- V19: the conversation must be a JSON array.
------------------------------------------------------------------------------
SELECT pg_temp.rejects(pg_temp.q(pg_temp.input(pg_temp.base())::text, c), pg_temp.e('INVALID_ENTRY'),
        format('V19.%s conversation %s', n, c))
    FROM unnest(ARRAY['{"role":"user","content":"2"}', '"messages"', 'null', '1', 'true']) WITH ORDINALITY AS t(c, n);
SELECT * FROM pg_temp.rejects(format('SELECT sandbox_persist.checkpoint_append(%L::json, NULL)', pg_temp.input(pg_temp.base())),
    pg_temp.e('INVALID_ENTRY'), 'V19.6 conversation SQL NULL');

------------------------------------------------------------------------------
-- R22: drive-letter look-alikes without a separator are accepted.
------------------------------------------------------------------------------
SELECT is(sandbox_persist.checkpoint_append(pg_temp.input(pg_temp.with_files(pg_temp.f('C:foo'), pg_temp.f('a:b'))),
        '[]')::jsonb, '{"headId":"2"}'::jsonb, 'R22.1 paths C:foo and a:b are accepted');
SELECT is((SELECT array_agg(e->>'path' ORDER BY n)
             FROM json_array_elements(sandbox_persist.checkpoint_get('2')->'files') WITH ORDINALITY AS t(e, n)),
    ARRAY['C:foo', 'a:b'], 'R22.2 they read back in the given order');

------------------------------------------------------------------------------
-- V14 (valid pairs): an escaped surrogate pair is a valid identifier.
------------------------------------------------------------------------------
SELECT is(pg_temp.sp(pg_temp.qsub(pg_temp.cp('@X@', '2'), '"\ud83d\ude00"', '2')), 'no error',
    'V14.13 checkpoint id \ud83d\ude00 (a valid pair) is accepted');
SELECT is(sandbox_persist.checkpoint_get_head('thread-a'), '😀', 'V14.14 it is stored as U+1F600');
SELECT is(sandbox_persist.checkpoint_get('😀')->>'id', '😀', 'V14.15 get by the decoded id finds it');
SELECT * FROM pg_temp.rejects(pg_temp.qsub(pg_temp.cp('@X@', '😀'), '"\u0031"', '😀'), pg_temp.e('DUPLICATE_ID'),
    'V14.16 id "\u0031" is decoded to "1" (so it duplicates checkpoint 1)');
SELECT is(pg_temp.try(pg_temp.qsub(pg_temp.cp('3', '😀') || jsonb_build_object('files', jsonb_build_array(pg_temp.f('@X@'))),
        '"\ud83d\ude00/\u00e9.txt"', '😀')), 'accepted',
    'V14.17 a path with an escaped valid surrogate pair is accepted');
SELECT is(pg_temp.try(pg_temp.qa(pg_temp.cp('3', '😀') || '{"reason": "whatever it is"}', '😀')), 'accepted',
    'V7.1 reason is not an enum: any string is accepted');

------------------------------------------------------------------------------
-- V23: now_ms is refused while allow_client_clock is off.
------------------------------------------------------------------------------
SET LOCAL sandbox_persist.allow_client_clock = off;
SELECT * FROM pg_temp.rejects('SELECT sandbox_persist.checkpoint_acquire_writer(''thread-c'', NULL, 1000)',
    pg_temp.e('CLIENT_CLOCK_NOT_ALLOWED'), 'V23.1 acquire with now_ms');
SELECT * FROM pg_temp.rejects(format('SELECT sandbox_persist.checkpoint_renew_writer(%L::json, NULL, %s)',
        pg_temp.w(), (extract(epoch FROM clock_timestamp()) * 1000)::bigint),
    pg_temp.e('CLIENT_CLOCK_NOT_ALLOWED'), 'V23.2 renew with now_ms');
SELECT * FROM pg_temp.rejects(pg_temp.q(pg_temp.input(pg_temp.cp('3', '😀'), '😀')::text, '[]',
        (extract(epoch FROM clock_timestamp()) * 1000)::bigint),
    pg_temp.e('CLIENT_CLOCK_NOT_ALLOWED'), 'V23.3 append with now_ms');
SELECT * FROM pg_temp.rejects(pg_temp.qdel(pg_temp.del_input('thread-a', '😀'), (extract(epoch FROM clock_timestamp()) * 1000)::bigint),
    pg_temp.e('CLIENT_CLOCK_NOT_ALLOWED'), 'V23.4 deleteHead with now_ms');
SELECT is(pg_temp.try(pg_temp.q(pg_temp.input(pg_temp.cp('3', '😀'), '😀')::text, '[]')), 'accepted',
    'V23.5 the same append on the server clock (now_ms NULL) is accepted');
SET LOCAL sandbox_persist.allow_client_clock = on;

SELECT * FROM finish();
ROLLBACK;
