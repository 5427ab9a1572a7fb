-- pgTAP: self-describing objects (issue 12, item 6).
--  * SD1-SD3: every function (each overload), table, view and explicit
--    sequence that is a member of the extension, and its schema, has a
--    comment, so \df+ sandbox_persist.* and \d+ explain themselves.
--  * SD12: every column of the views (what operators read) has one too.
--  * SD4: a comment says something: at least six words, and more than the
--    object's own name.
--  * SD5-SD7: every sandbox_persist.* setting has a short and a long
--    description (what SHOW ALL and pg_settings print; settings cannot take
--    COMMENT ON).
--  * SD8-SD11: the checks fail when a comment is missing: a comment dropped
--    from a function, a table, a view and the schema, and a function added to
--    the extension without one, are each found (inside savepoints rolled back).
-- Identity sequences (behind GENERATED ... AS IDENTITY columns) are left out:
-- they belong to their column, and \d+ of the table describes them.
BEGIN;
SELECT plan(15);
SET LOCAL client_min_messages = warning;

-- Members of the extension that lack a non-empty comment, by kind.
CREATE FUNCTION pg_temp.undescribed(kind text) RETURNS SETOF text LANGUAGE sql AS $$
    SELECT p.oid::regprocedure::text
      FROM pg_depend d JOIN pg_proc p ON p.oid = d.objid
     WHERE kind = 'function' AND d.classid = 'pg_proc'::regclass AND d.deptype = 'e'
       AND d.refobjid = (SELECT oid FROM pg_extension WHERE extname = 'sandbox_persist')
       AND coalesce(btrim(obj_description(p.oid, 'pg_proc')), '') = ''
    UNION ALL
    SELECT c.oid::regclass::text
      FROM pg_depend d JOIN pg_class c ON c.oid = d.objid
     WHERE kind = 'relation' AND d.classid = 'pg_class'::regclass AND d.deptype = 'e'
       AND d.refobjid = (SELECT oid FROM pg_extension WHERE extname = 'sandbox_persist')
       AND c.relkind IN ('r', 'p', 'v', 'm', 'f', 'S')
       AND NOT EXISTS (SELECT 1 FROM pg_depend i      -- an identity sequence
                        WHERE i.classid = 'pg_class'::regclass AND i.objid = c.oid
                          AND i.refclassid = 'pg_class'::regclass AND i.deptype = 'i')
       AND coalesce(btrim(obj_description(c.oid, 'pg_class')), '') = ''
    UNION ALL
    SELECT 'schema ' || n.nspname
      FROM pg_namespace n
     WHERE kind = 'schema' AND n.nspname = 'sandbox_persist'
       AND coalesce(btrim(obj_description(n.oid, 'pg_namespace')), '') = ''
    ORDER BY 1
$$;

-- View columns of the extension without a non-empty comment.
CREATE FUNCTION pg_temp.undescribed_view_columns() RETURNS SETOF text LANGUAGE sql AS $$
    SELECT c.oid::regclass::text || '.' || a.attname
      FROM pg_depend d JOIN pg_class c ON c.oid = d.objid
      JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
     WHERE d.classid = 'pg_class'::regclass AND d.deptype = 'e' AND c.relkind IN ('v', 'm')
       AND d.refobjid = (SELECT oid FROM pg_extension WHERE extname = 'sandbox_persist')
       AND coalesce(btrim(col_description(c.oid, a.attnum)), '') = ''
    ORDER BY 1
$$;

-- Comments of members that say too little: fewer than six words, or nothing
-- but the object's name.
CREATE FUNCTION pg_temp.terse() RETURNS SETOF text LANGUAGE sql AS $$
    WITH described AS (
        SELECT p.oid::regprocedure::text AS object, p.proname::text AS name,
               obj_description(p.oid, 'pg_proc') AS text
          FROM pg_depend d JOIN pg_proc p ON p.oid = d.objid
         WHERE d.classid = 'pg_proc'::regclass AND d.deptype = 'e'
           AND d.refobjid = (SELECT oid FROM pg_extension WHERE extname = 'sandbox_persist')
        UNION ALL
        SELECT c.oid::regclass::text, c.relname::text, obj_description(c.oid, 'pg_class')
          FROM pg_depend d JOIN pg_class c ON c.oid = d.objid
         WHERE d.classid = 'pg_class'::regclass AND d.deptype = 'e'
           AND d.refobjid = (SELECT oid FROM pg_extension WHERE extname = 'sandbox_persist')
        UNION ALL
        SELECT 'schema sandbox_persist', 'sandbox_persist',
               obj_description('sandbox_persist'::regnamespace, 'pg_namespace')
    )
    SELECT object FROM described
     WHERE text IS NOT NULL
       AND (array_length(regexp_split_to_array(btrim(text), '\s+'), 1) < 6
            OR lower(regexp_replace(text, '[^a-zA-Z]', '', 'g'))
               = lower(regexp_replace(name, '[^a-zA-Z]', '', 'g')))
    ORDER BY 1
$$;

SELECT is(ARRAY(SELECT pg_temp.undescribed('function')), '{}'::text[],
          'SD1: every function of the extension, each overload, has a comment');
SELECT is(ARRAY(SELECT pg_temp.undescribed('relation')), '{}'::text[],
          'SD2: every table, view and explicit sequence of the extension has a comment');
SELECT is(ARRAY(SELECT pg_temp.undescribed('schema')), '{}'::text[],
          'SD3: the schema sandbox_persist has a comment');
SELECT is(ARRAY(SELECT pg_temp.terse()), '{}'::text[],
          'SD4: every comment says more than the object''s name, in at least six words');

SELECT is(ARRAY(SELECT pg_temp.undescribed_view_columns()), '{}'::text[],
          'SD12: every column of the extension''s views has a comment');

-- The settings exist once the library is loaded.
LOAD 'sandbox_persist';
SELECT cmp_ok((SELECT count(*) FROM pg_settings WHERE name LIKE 'sandbox\_persist.%')::int, '>=', 10,
              'SD5: the sandbox_persist settings are defined (the library is loaded)');
SELECT is(ARRAY(SELECT name FROM pg_settings
                 WHERE name LIKE 'sandbox\_persist.%' AND coalesce(btrim(short_desc), '') = ''
                 ORDER BY name), '{}'::text[],
          'SD6: every sandbox_persist setting has a short description');
SELECT is(ARRAY(SELECT name FROM pg_settings
                 WHERE name LIKE 'sandbox\_persist.%' AND coalesce(btrim(extra_desc), '') = ''
                 ORDER BY name), '{}'::text[],
          'SD7: every sandbox_persist setting has a long description');

-- The checks find a missing comment.
SAVEPOINT dropped;
COMMENT ON FUNCTION sandbox_persist.run_get(text) IS NULL;
SELECT is(ARRAY(SELECT pg_temp.undescribed('function')), ARRAY['sandbox_persist.run_get(text)'],
          'SD8: a function whose comment was dropped is found');
COMMENT ON TABLE sandbox_persist.runs IS NULL;
COMMENT ON VIEW sandbox_persist.overview IS '';
SELECT is(ARRAY(SELECT pg_temp.undescribed('relation')),
          ARRAY['sandbox_persist.overview', 'sandbox_persist.runs'],
          'SD9: a table and a view whose comments were dropped are found');
COMMENT ON SCHEMA sandbox_persist IS NULL;
SELECT is(ARRAY(SELECT pg_temp.undescribed('schema')), ARRAY['schema sandbox_persist'],
          'SD10: the schema without its comment is found');
COMMENT ON COLUMN sandbox_persist.overview.blobs_awaiting_gc IS NULL;
SELECT is(ARRAY(SELECT pg_temp.undescribed_view_columns()), ARRAY['sandbox_persist.overview.blobs_awaiting_gc'],
          'SD12: a view column whose comment was dropped is found');
ROLLBACK TO SAVEPOINT dropped;

-- What an upgrade section that forgets its comment leaves behind.
SAVEPOINT added;
CREATE FUNCTION sandbox_persist.sd_probe(x integer) RETURNS integer LANGUAGE sql AS 'SELECT x';
ALTER EXTENSION sandbox_persist ADD FUNCTION sandbox_persist.sd_probe(integer);
SELECT is(ARRAY(SELECT pg_temp.undescribed('function')), ARRAY['sandbox_persist.sd_probe(integer)'],
          'SD11: a function added to the extension without a comment is found');
COMMENT ON FUNCTION sandbox_persist.sd_probe(integer) IS 'sd probe';
SELECT is(ARRAY(SELECT pg_temp.terse()), ARRAY['sandbox_persist.sd_probe(integer)'],
          'SD11: a comment that only restates the name is found');
ROLLBACK TO SAVEPOINT added;

SELECT is(ARRAY(SELECT pg_temp.undescribed('function')) || ARRAY(SELECT pg_temp.undescribed('relation')),
          '{}'::text[], 'SD1-SD2 hold again after the rollback');

SELECT * FROM finish();
ROLLBACK;
