-- pgTAP: sandbox instance store (docs/contract/instances.md).
-- Cases: I1-I7 and the instance parts of V1-V6, V9, V10, V13-V16.
-- Run with: pg_prove -d <db> test/pgtap/instances.sql (needs allow_test_reset).
BEGIN;
SELECT plan(116);
SELECT sandbox_persist._reset_for_tests();
\ir lib/foundation_helpers.psql

-- An upsert of the base record of the upstream suite with one field replaced
-- (or removed when the replacement is SQL NULL). Keys in record order.
CREATE FUNCTION pg_temp.rec(field text, val text) RETURNS text LANGUAGE sql AS $$
    SELECT '{' || string_agg(format('"%s":%s', k, CASE WHEN k = field THEN val ELSE v END), ',' ORDER BY n) || '}'
    FROM (VALUES (1, 'key', '"v-inst"'), (2, 'provider', '"fake"'),
                 (3, 'providerSandboxId', '"sb-new"'), (4, 'latestSnapshotId', '"snap-new"'),
                 (5, 'threadId', '"v-t"'), (6, 'latestRunId', '"run-new"'), (7, 'updatedAt', '9'))
         AS t(n, k, v)
    WHERE k <> field OR val IS NOT NULL
$$;

------------------------------------------------------------------------------
-- I1-I7 (each upstream case starts from an empty store).
------------------------------------------------------------------------------
SELECT ok(sandbox_persist.instance_get('absent') IS NULL,
    'I1 get of a missing key is SQL NULL');

SELECT sandbox_persist._reset_for_tests();
SELECT lives_ok($$SELECT sandbox_persist.instance_upsert('{"key":"thread-1","provider":"fake","providerSandboxId":"sb-1","latestSnapshotId":"snap-1","threadId":"thread-1","latestRunId":"run-1","updatedAt":1}')$$,
    'I2.1 upsert of a record with both optional fields');
SELECT is(sandbox_persist.instance_get('thread-1')::jsonb,
    '{"key":"thread-1","provider":"fake","providerSandboxId":"sb-1","latestSnapshotId":"snap-1","threadId":"thread-1","latestRunId":"run-1","updatedAt":1}'::jsonb,
    'I2.2 the record deep-equals after get: no key added or missing');
SELECT is(ARRAY(SELECT k FROM json_object_keys(sandbox_persist.instance_get($q$thread-1$q$)) AS t(k) ORDER BY k COLLATE "C"),
    ARRAY['key', 'latestRunId', 'latestSnapshotId', 'provider', 'providerSandboxId', 'threadId', 'updatedAt'],
    'I2.3 the result carries exactly the seven record keys, each once');
SELECT is(json_typeof(sandbox_persist.instance_get('thread-1')->'updatedAt'), 'number',
    'I2.4 updatedAt is a JSON number, not a string');
SELECT sandbox_persist.instance_upsert('{"key":"thread-e","provider":"fake","providerSandboxId":"sb-1","latestSnapshotId":"","threadId":"thread-e","latestRunId":"","updatedAt":1}');
SELECT is(sandbox_persist.instance_get('thread-e')::jsonb,
    '{"key":"thread-e","provider":"fake","providerSandboxId":"sb-1","latestSnapshotId":"","threadId":"thread-e","latestRunId":"","updatedAt":1}'::jsonb,
    'I2.5 empty-string optionals are values: they round-trip as ""');

SELECT sandbox_persist._reset_for_tests();
SELECT sandbox_persist.instance_upsert('{"key":"thread-1","provider":"fake","providerSandboxId":"sb-1","threadId":"thread-1","updatedAt":1}');
SELECT is(sandbox_persist.instance_get('thread-1')::jsonb,
    '{"key":"thread-1","provider":"fake","providerSandboxId":"sb-1","threadId":"thread-1","updatedAt":1}'::jsonb,
    'I3.1 a record without optionals reads back equal');
SELECT ok(NOT sandbox_persist.instance_get('thread-1')::jsonb ? 'latestSnapshotId',
    'I3.2 latestSnapshotId is not a key of the result');
SELECT ok(NOT sandbox_persist.instance_get('thread-1')::jsonb ? 'latestRunId',
    'I3.3 latestRunId is not a key of the result');

SELECT sandbox_persist._reset_for_tests();
SELECT sandbox_persist.instance_upsert('{"key":"thread-1","provider":"fake","providerSandboxId":"sb-1","latestSnapshotId":"snap-1","threadId":"thread-1","updatedAt":1}');
SELECT sandbox_persist.instance_upsert('{"key":"thread-1","provider":"fake","providerSandboxId":"sb-2","threadId":"thread-1","updatedAt":2}');
SELECT is(sandbox_persist.instance_get('thread-1')->>'providerSandboxId', 'sb-2',
    'I4.1 re-upsert replaces providerSandboxId');
SELECT is(sandbox_persist.instance_get('thread-1')->>'updatedAt', '2',
    'I4.2 re-upsert replaces updatedAt');
SELECT ok(NOT sandbox_persist.instance_get('thread-1')::jsonb ? 'latestSnapshotId',
    'I4.3 re-upsert without latestSnapshotId clears it (key absent), never merges');
SELECT is((SELECT count(*) FROM sandbox_persist.instances), 1::bigint,
    'I4.4 the re-upsert replaced the row rather than adding one');
SELECT sandbox_persist.instance_upsert('{"key":"thread-1","provider":"fake","providerSandboxId":"sb-3","latestSnapshotId":"snap-3","threadId":"thread-1","latestRunId":"run-3","updatedAt":3}');
SELECT sandbox_persist.instance_upsert('{"key":"thread-1","provider":"fake","providerSandboxId":"sb-3","latestSnapshotId":null,"threadId":"thread-1","latestRunId":null,"updatedAt":4}');
SELECT is(sandbox_persist.instance_get('thread-1')::jsonb,
    '{"key":"thread-1","provider":"fake","providerSandboxId":"sb-3","threadId":"thread-1","updatedAt":4}'::jsonb,
    'I4.5 optionals given as JSON null (explicit undefined) clear them');
SELECT sandbox_persist.instance_upsert('{"key":"thread-1","provider":"other","providerSandboxId":"sb-4","threadId":"thread-9","latestRunId":"run-4","updatedAt":5}');
SELECT is(sandbox_persist.instance_get('thread-1')::jsonb,
    '{"key":"thread-1","provider":"other","providerSandboxId":"sb-4","threadId":"thread-9","latestRunId":"run-4","updatedAt":5}'::jsonb,
    'I4.6 every column is overwritten by a full replace (provider and threadId too)');

SELECT sandbox_persist._reset_for_tests();
SELECT sandbox_persist.instance_upsert('{"key":"a","provider":"fake","providerSandboxId":"sb-1","threadId":"a","updatedAt":1}');
SELECT sandbox_persist.instance_upsert('{"key":"b","provider":"fake","providerSandboxId":"sb-b","threadId":"b","updatedAt":1}');
SELECT is(sandbox_persist.instance_get('a')->>'providerSandboxId', 'sb-1',
    'I5.1 record a keeps its own providerSandboxId');
SELECT is(sandbox_persist.instance_get('b')->>'providerSandboxId', 'sb-b',
    'I5.2 record b keeps its own providerSandboxId');

SELECT sandbox_persist._reset_for_tests();
SELECT sandbox_persist.instance_upsert('{"key":"thread-1","provider":"fake","providerSandboxId":"sb-1","threadId":"thread-1","updatedAt":1}');
SELECT sandbox_persist.instance_upsert('{"key":"thread-2","provider":"fake","providerSandboxId":"sb-2","threadId":"thread-2","updatedAt":1}');
SELECT is(sandbox_persist.instance_delete('thread-1'), true,
    'I6.1 delete of an existing key returns true');
SELECT ok(sandbox_persist.instance_get('thread-1') IS NULL,
    'I6.2 after delete, get is SQL NULL');
SELECT is(sandbox_persist.instance_get('thread-2')->>'providerSandboxId', 'sb-2',
    'I6.3 delete removes only its own key');

SELECT sandbox_persist._reset_for_tests();
SELECT sandbox_persist.instance_upsert('{"key":"present","provider":"fake","providerSandboxId":"sb-1","threadId":"t","updatedAt":1}');
SELECT lives_ok($$SELECT sandbox_persist.instance_delete('absent')$$,
    'I7.1 delete of a missing key does not throw');
SELECT is(sandbox_persist.instance_delete('absent'), false,
    'I7.2 delete of a missing key returns false');
SELECT is((SELECT count(*) FROM sandbox_persist.instances), 1::bigint,
    'I7.3 delete of a missing key leaves the other rows');

------------------------------------------------------------------------------
-- V: bad instance records. The fixture row v-inst is overwritten by any
-- wrongly accepted upsert (every call uses other values).
------------------------------------------------------------------------------
SELECT sandbox_persist._reset_for_tests();
SELECT sandbox_persist.instance_upsert('{"key":"v-inst","provider":"fake","providerSandboxId":"sb-old","latestSnapshotId":"snap-old","threadId":"v-t","latestRunId":"run-old","updatedAt":1}');
SELECT is(sandbox_persist.instance_get('v-inst')->>'providerSandboxId', 'sb-old',
    'V1.0 (control) the fixture row is stored');
SELECT lives_ok(format('SELECT sandbox_persist.instance_upsert(%L)', pg_temp.rec('updatedAt', '9')),
    'V1.0 (control) the base record of the V cases is valid');
SELECT sandbox_persist.instance_upsert('{"key":"v-inst","provider":"fake","providerSandboxId":"sb-old","latestSnapshotId":"snap-old","threadId":"v-t","latestRunId":"run-old","updatedAt":1}');

-- V1 malformed JSON
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.instance_upsert('{"key":"v-inst","provider":')$$,
    '22P02', 'V1.1 malformed JSON record');

-- V2 not an object
SELECT * FROM pg_temp.rejects(format('SELECT sandbox_persist.instance_upsert(%L)', '[' || pg_temp.rec('updatedAt', '9') || ']'),
    '22023', 'V2.1 record given as a JSON array');
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.instance_upsert('"v-inst"')$$,
    '22023', 'V2.2 record given as a JSON string');

-- V3 wrong types
SELECT * FROM pg_temp.rejects(format('SELECT sandbox_persist.instance_upsert(%L)', pg_temp.rec('key', '7')),
    '22023', 'V3.1 key 7 (a number)');
SELECT * FROM pg_temp.rejects(format('SELECT sandbox_persist.instance_upsert(%L)', pg_temp.rec('provider', '5')),
    '22023', 'V3.2 provider 5 (a number)');
SELECT * FROM pg_temp.rejects(format('SELECT sandbox_persist.instance_upsert(%L)', pg_temp.rec('providerSandboxId', 'true')),
    '22023', 'V3.3 providerSandboxId true (a boolean)');
SELECT * FROM pg_temp.rejects(format('SELECT sandbox_persist.instance_upsert(%L)', pg_temp.rec('threadId', '{}')),
    '22023', 'V3.4 threadId {} (an object)');
SELECT * FROM pg_temp.rejects(format('SELECT sandbox_persist.instance_upsert(%L)', pg_temp.rec('latestSnapshotId', '1')),
    '22023', 'V3.5 latestSnapshotId 1 (a number)');
SELECT * FROM pg_temp.rejects(format('SELECT sandbox_persist.instance_upsert(%L)', pg_temp.rec('latestRunId', '["r"]')),
    '22023', 'V3.6 latestRunId ["r"] (an array)');
SELECT * FROM pg_temp.rejects(format('SELECT sandbox_persist.instance_upsert(%L)', pg_temp.rec('updatedAt', '"9"')),
    '22023', 'V3.7 updatedAt "9" (a string)');
SELECT * FROM pg_temp.rejects(format('SELECT sandbox_persist.instance_upsert(%L)', pg_temp.rec('updatedAt', 'false')),
    '22023', 'V3.8 updatedAt false (a boolean)');

-- V4 SQL NULL arguments
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.instance_upsert(NULL)$$,
    '22004', 'V4.1 instance_upsert(NULL)');
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.instance_get(NULL)$$,
    '22004', 'V4.2 instance_get(NULL)');
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.instance_delete(NULL)$$,
    '22004', 'V4.3 instance_delete(NULL)');

-- V5 required fields absent or JSON null
SELECT * FROM pg_temp.rejects(format('SELECT sandbox_persist.instance_upsert(%L)', pg_temp.rec('key', NULL)),
    '22004', 'V5.1 key absent');
SELECT * FROM pg_temp.rejects(format('SELECT sandbox_persist.instance_upsert(%L)', pg_temp.rec('provider', NULL)),
    '22004', 'V5.2 provider absent');
SELECT * FROM pg_temp.rejects(format('SELECT sandbox_persist.instance_upsert(%L)', pg_temp.rec('providerSandboxId', NULL)),
    '22004', 'V5.3 providerSandboxId absent');
SELECT * FROM pg_temp.rejects(format('SELECT sandbox_persist.instance_upsert(%L)', pg_temp.rec('threadId', NULL)),
    '22004', 'V5.4 threadId absent');
SELECT * FROM pg_temp.rejects(format('SELECT sandbox_persist.instance_upsert(%L)', pg_temp.rec('updatedAt', NULL)),
    '22004', 'V5.5 updatedAt absent');
SELECT * FROM pg_temp.rejects(format('SELECT sandbox_persist.instance_upsert(%L)', pg_temp.rec('key', 'null')),
    '22004', 'V5.6 key JSON null');
SELECT * FROM pg_temp.rejects(format('SELECT sandbox_persist.instance_upsert(%L)', pg_temp.rec('provider', 'null')),
    '22004', 'V5.7 provider JSON null');
SELECT * FROM pg_temp.rejects(format('SELECT sandbox_persist.instance_upsert(%L)', pg_temp.rec('providerSandboxId', 'null')),
    '22004', 'V5.8 providerSandboxId JSON null');
SELECT * FROM pg_temp.rejects(format('SELECT sandbox_persist.instance_upsert(%L)', pg_temp.rec('threadId', 'null')),
    '22004', 'V5.9 threadId JSON null');
SELECT * FROM pg_temp.rejects(format('SELECT sandbox_persist.instance_upsert(%L)', pg_temp.rec('updatedAt', 'null')),
    '22004', 'V5.10 updatedAt JSON null (NaN from JSON.stringify)');

-- V6 unknown keys (the message names the key)
SELECT * FROM pg_temp.rejects(format('SELECT sandbox_persist.instance_upsert(%L)',
        rtrim(pg_temp.rec('updatedAt', '9'), '}') || ',"latest_snapshot_id":"snap-x"}'),
    '22023', 'V6.1 unknown key latest_snapshot_id', 'latest_snapshot_id');
SELECT * FROM pg_temp.rejects(format('SELECT sandbox_persist.instance_upsert(%L)',
        rtrim(pg_temp.rec('updatedAt', '9'), '}') || ',"createdAt":9}'),
    '22023', 'V6.2 unknown key createdAt', 'createdAt');

-- V9 fractional updatedAt
SELECT * FROM pg_temp.rejects(format('SELECT sandbox_persist.instance_upsert(%L)', pg_temp.rec('updatedAt', '1.5')),
    '22023', 'V9.1 updatedAt 1.5');
SELECT * FROM pg_temp.rejects(format('SELECT sandbox_persist.instance_upsert(%L)', pg_temp.rec('updatedAt', '1700000000000.25')),
    '22023', 'V9.2 updatedAt 1700000000000.25');
SELECT * FROM pg_temp.rejects(format('SELECT sandbox_persist.instance_upsert(%L)', pg_temp.rec('updatedAt', '1700000000000.0000001')),
    '22023', 'V9.3 updatedAt 1700000000000.0000001 (a fraction a double would round away)');

-- V10 updatedAt beyond +/-(2^53 - 1)
SELECT * FROM pg_temp.rejects(format('SELECT sandbox_persist.instance_upsert(%L)', pg_temp.rec('updatedAt', '9007199254740992')),
    '22003', 'V10.1 updatedAt 2^53');
SELECT * FROM pg_temp.rejects(format('SELECT sandbox_persist.instance_upsert(%L)', pg_temp.rec('updatedAt', '-9007199254740992')),
    '22003', 'V10.2 updatedAt -2^53');

-- V13 U+0000 in structural strings
SELECT * FROM pg_temp.rejects(format('SELECT sandbox_persist.instance_upsert(%L)', pg_temp.rec('key', '"v-inst\u0000"')),
    '22021', 'V13.1 key containing \u0000');
SELECT * FROM pg_temp.rejects(format('SELECT sandbox_persist.instance_upsert(%L)', pg_temp.rec('threadId', '"\u0000"')),
    '22021', 'V13.2 threadId \u0000');
SELECT * FROM pg_temp.rejects(format('SELECT sandbox_persist.instance_upsert(%L)', pg_temp.rec('latestSnapshotId', '"snap\u0000"')),
    '22021', 'V13.3 latestSnapshotId containing \u0000');

-- V14 lone surrogate escapes
SELECT * FROM pg_temp.rejects(format('SELECT sandbox_persist.instance_upsert(%L)', pg_temp.rec('key', '"\ud800"')),
    '22021', 'V14.1 key \ud800');
SELECT * FROM pg_temp.rejects(format('SELECT sandbox_persist.instance_upsert(%L)', pg_temp.rec('providerSandboxId', '"sb\udc00"')),
    '22021', 'V14.2 providerSandboxId with a lone low surrogate');

-- V15 key over 1024 bytes
SELECT * FROM pg_temp.rejects(format('SELECT sandbox_persist.instance_upsert(%L)', pg_temp.rec('key', '"' || repeat('k', 1025) || '"')),
    '22001', 'V15.1 key of 1025 bytes');
SELECT * FROM pg_temp.rejects(format('SELECT sandbox_persist.instance_upsert(%L)', pg_temp.rec('key', '"' || repeat('é', 513) || '"')),
    '22001', 'V15.2 key of 513 characters but 1026 bytes');
SELECT * FROM pg_temp.rejects(format('SELECT sandbox_persist.instance_get(%L)', repeat('k', 1025)),
    '22001', 'V15.3 instance_get with a 1025-byte key');
SELECT * FROM pg_temp.rejects(format('SELECT sandbox_persist.instance_delete(%L)', repeat('k', 1025)),
    '22001', 'V15.4 instance_delete with a 1025-byte key');
SELECT lives_ok(format('SELECT sandbox_persist.instance_upsert(%L)', pg_temp.rec('key', '"' || repeat('é', 512) || '"')),
    'V15.5 (control) a key of exactly 1024 bytes is accepted');
SELECT ok(sandbox_persist.instance_get(repeat('é', 512)) IS NOT NULL,
    'V15.6 (control) the 1024-byte key reads back');

-- V16 empty key
SELECT * FROM pg_temp.rejects(format('SELECT sandbox_persist.instance_upsert(%L)', pg_temp.rec('key', '""')),
    '22023', 'V16.1 empty key');
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.instance_get('')$$,
    '22023', 'V16.2 instance_get('''')');
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.instance_delete('')$$,
    '22023', 'V16.3 instance_delete('''')');

SELECT is(sandbox_persist.instance_get('v-inst')::jsonb,
    '{"key":"v-inst","provider":"fake","providerSandboxId":"sb-old","latestSnapshotId":"snap-old","threadId":"v-t","latestRunId":"run-old","updatedAt":1}'::jsonb,
    'V16.4 (control) after every rejected call the fixture row v-inst is unchanged');

SELECT * FROM finish();
ROLLBACK;
