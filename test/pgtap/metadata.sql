-- pgTAP: metadata store (docs/contract/chat-stores.md §2).
-- Cases: P24, V1, V4, V13, V15, V16, V17 (metadata parts).
-- Run with: pg_prove -d <db> test/pgtap/metadata.sql (needs allow_test_reset).
BEGIN;
SELECT plan(58);
SELECT sandbox_persist._reset_for_tests();

------------------------------------------------------------------------------
-- Helpers (temporary, gone at ROLLBACK).
------------------------------------------------------------------------------

-- Every row of the four chat-store tables, in a fixed order: two equal values
-- mean nothing was inserted, deleted or changed (seq and resolved_at included).
CREATE FUNCTION pg_temp.state() RETURNS text LANGUAGE sql AS $$
    SELECT concat_ws(E'\n',
        'interrupts:' || (SELECT count(*) FROM sandbox_persist.interrupts),
        (SELECT string_agg(i::text, E'\n' ORDER BY i.interrupt_id) FROM sandbox_persist.interrupts i),
        'metadata:' || (SELECT count(*) FROM sandbox_persist.metadata),
        (SELECT string_agg(m::text, E'\n' ORDER BY m.namespace, m.meta_key) FROM sandbox_persist.metadata m),
        'generation_runs:' || (SELECT count(*) FROM sandbox_persist.generation_runs),
        (SELECT string_agg(g::text, E'\n' ORDER BY g.run_id) FROM sandbox_persist.generation_runs g),
        'artifacts:' || (SELECT count(*) FROM sandbox_persist.artifacts),
        (SELECT string_agg(a::text, E'\n' ORDER BY a.artifact_id) FROM sandbox_persist.artifacts a))
$$;

-- {sqlstate, message, detail} of the error a statement raises, or NULL.
CREATE FUNCTION pg_temp.err(sql text) RETURNS text[] LANGUAGE plpgsql AS $$
DECLARE
    st text; msg text; det text;
BEGIN
    EXECUTE sql;
    RETURN NULL;
EXCEPTION WHEN OTHERS THEN
    GET STACKED DIAGNOSTICS st = RETURNED_SQLSTATE, msg = MESSAGE_TEXT, det = PG_EXCEPTION_DETAIL;
    RETURN ARRAY[st, msg, det];
END
$$;

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

------------------------------------------------------------------------------
-- P24: two independent key columns.
------------------------------------------------------------------------------
SELECT ok(sandbox_persist.metadata_get('ns-a', 'choice') IS NULL,
    'P24.1 get of a missing entry is SQL NULL');
SELECT lives_ok($$SELECT sandbox_persist.metadata_set('ns-a', 'choice', '"left"')$$,
    'P24.2 set stores a bare string value');
SELECT sandbox_persist.metadata_set('ns-b', 'choice', '"right"');
SELECT is(sandbox_persist.metadata_get('ns-a', 'choice')::text, '"left"',
    'P24.3 namespace ns-a holds its own value for the key');
SELECT is(sandbox_persist.metadata_get('ns-b', 'choice')::text, '"right"',
    'P24.4 namespace ns-b holds the same key independently');
SELECT sandbox_persist.metadata_set('ns-a', 'choice', '"center"');
SELECT is(sandbox_persist.metadata_get('ns-a', 'choice')::text, '"center"',
    'P24.5 an overwrite applies');
SELECT is(sandbox_persist.metadata_get('ns-b', 'choice')::text, '"right"',
    'P24.6 the overwrite touches only its namespace');
SELECT is((SELECT count(*) FROM sandbox_persist.metadata WHERE meta_key = 'choice'), 2::bigint,
    'P24.7 an overwrite keeps one row per (namespace, key)');
SELECT is(sandbox_persist.metadata_delete('ns-a', 'choice'), true,
    'P24.8 delete of an existing entry returns true');
SELECT ok(sandbox_persist.metadata_get('ns-a', 'choice') IS NULL,
    'P24.9 the deleted entry reads back as SQL NULL');
SELECT is(sandbox_persist.metadata_get('ns-b', 'choice')::text, '"right"',
    'P24.10 delete affects only its namespace');
SELECT is(sandbox_persist.metadata_delete('ns-a', 'choice'), false,
    'P24.11 delete of a missing entry is a silent no-op returning false');
SELECT sandbox_persist.metadata_set('a:b', 'c', '1');
SELECT sandbox_persist.metadata_set('a', 'b:c', '2');
SELECT is(sandbox_persist.metadata_get('a:b', 'c')::text, '1',
    'P24.12 (''a:b'', ''c'') holds its value');
SELECT is(sandbox_persist.metadata_get('a', 'b:c')::text, '2',
    'P24.13 (''a'', ''b:c'') is a different entry');
SELECT sandbox_persist.metadata_delete('a:b', 'c');
SELECT ok(sandbox_persist.metadata_get('a:b', 'c') IS NULL,
    'P24.14 deleting (''a:b'', ''c'') removes it');
SELECT is(sandbox_persist.metadata_get('a', 'b:c')::text, '2',
    'P24.15 deleting (''a:b'', ''c'') keeps (''a'', ''b:c'')');
SELECT ok(sandbox_persist.metadata_get('ab', 'c') IS NULL AND sandbox_persist.metadata_get('a', 'bc') IS NULL,
    'P24.16 no concatenated identity exists');

------------------------------------------------------------------------------
-- Values: any JSON but null, stored and returned verbatim.
------------------------------------------------------------------------------
SELECT sandbox_persist.metadata_set('vals', 'obj', '{"b":1,"a":[true,null],"b":2}');
SELECT is(sandbox_persist.metadata_get('vals', 'obj')::text, '{"b":1,"a":[true,null],"b":2}',
    'P24.17 an object value reads back verbatim (key order and duplicate keys kept)');
SELECT sandbox_persist.metadata_set('vals', 'num', '1.50');
SELECT is(sandbox_persist.metadata_get('vals', 'num')::text, '1.50',
    'P24.18 a number reads back as written');
SELECT sandbox_persist.metadata_set('vals', 'false', 'false');
SELECT is(sandbox_persist.metadata_get('vals', 'false')::text, 'false',
    'P24.19 false is a value, not absence');
SELECT sandbox_persist.metadata_set('vals', 'arr', '[]');
SELECT is(sandbox_persist.metadata_get('vals', 'arr')::text, '[]',
    'P24.20 an empty array is a value');
SELECT sandbox_persist.metadata_set('vals', 'empty', '""');
SELECT is(sandbox_persist.metadata_get('vals', 'empty')::text, '""',
    'P24.21 the empty string is a value');
SELECT sandbox_persist.metadata_set('vals', 'nul', '{"t":"\u0000\ud800"}');
SELECT is(sandbox_persist.metadata_get('vals', 'nul')::text, '{"t":"\u0000\ud800"}',
    'V13.1 \u0000 and a lone surrogate escape inside a value are preserved byte for byte');
SELECT sandbox_persist.metadata_set('ns-😀', 'é', '"unicode"');
SELECT is(sandbox_persist.metadata_get('ns-😀', 'é')::text, '"unicode"',
    'P24.22 non-ASCII namespace and key round-trip');

------------------------------------------------------------------------------
-- V: bad input. Fixture entry (v, k) = {"keep":true}.
------------------------------------------------------------------------------
SELECT sandbox_persist.metadata_set('v', 'k', '{"keep":true}');

-- V17 null values
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.metadata_set('v', 'k', 'null')$$,
    '22004', 'V17.1 JSON null over an existing entry');
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.metadata_set('v', 'new', 'null')$$,
    '22004', 'V17.2 JSON null for a new entry');
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.metadata_set('v', 'k', NULL)$$,
    '22004', 'V17.3 SQL NULL over an existing entry');
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.metadata_set('v', 'new', '  null  ')$$,
    '22004', 'V17.4 JSON null surrounded by whitespace');
SELECT is((pg_temp.err($$SELECT sandbox_persist.metadata_set('v', 'k', 'null')$$))[3],
    'A null metadata value is indistinguishable from a missing entry; use delete to remove it.',
    'V17.5 the errdetail tells the caller to use delete');
SELECT is(sandbox_persist.metadata_get('v', 'k')::text, '{"keep":true}',
    'V17.6 the existing value is untouched');

-- V1 malformed JSON
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.metadata_set('v', 'k', '{"a":')$$,
    '22P02', 'V1.1 malformed JSON value');

-- V4 SQL NULL arguments
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.metadata_set(NULL, 'k', '1')$$,
    '22004', 'V4.1 metadata_set with a NULL namespace');
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.metadata_set('v', NULL, '1')$$,
    '22004', 'V4.2 metadata_set with a NULL key');
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.metadata_get(NULL, 'k')$$,
    '22004', 'V4.3 metadata_get with a NULL namespace');
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.metadata_delete('v', NULL)$$,
    '22004', 'V4.4 metadata_delete with a NULL key');

-- V13 U+0000 in a text identifier
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.metadata_set(E'v\x00', 'k', '1')$$,
    '22021', 'V13.2 a namespace containing U+0000');

-- V15 identifiers over 1024 bytes
SELECT * FROM pg_temp.rejects(format($$SELECT sandbox_persist.metadata_set('%s', 'k', '1')$$, repeat('n', 1025)),
    '22001', 'V15.1 a namespace of 1025 bytes');
SELECT * FROM pg_temp.rejects(format($$SELECT sandbox_persist.metadata_set('v', '%s', '1')$$, repeat('é', 513)),
    '22001', 'V15.2 a key of 1026 bytes');
SELECT lives_ok(format($$SELECT sandbox_persist.metadata_set('%s', '%s', '1')$$, repeat('n', 1024), repeat('é', 512)),
    'V15.3 (control) namespace and key of exactly 1024 bytes are accepted');

-- V16 empty identifiers
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.metadata_set('', 'k', '1')$$,
    '22023', 'V16.1 an empty namespace');
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.metadata_set('v', '', '1')$$,
    '22023', 'V16.2 an empty key');
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.metadata_get('', 'k')$$,
    '22023', 'V16.3 metadata_get with an empty namespace');
SELECT * FROM pg_temp.rejects($$SELECT sandbox_persist.metadata_delete('v', '')$$,
    '22023', 'V16.4 metadata_delete with an empty key');

SELECT * FROM finish();
ROLLBACK;
