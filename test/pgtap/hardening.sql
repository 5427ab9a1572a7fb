-- pgTAP: the hardening every install and upgrade ends with, sandbox_persist._harden().
--  * After the install or upgrade that built this database: no function,
--    table, view or sequence of the schema is usable by PUBLIC, every one has
--    an explicit ACL, every SECURITY DEFINER function pins its search_path,
--    and the routine itself is closed (superuser only, never granted).
--  * What a later upgrade script would do, simulated in this transaction: it
--    adds a function (executable by PUBLIC, as CREATE FUNCTION leaves it, and
--    without a pinned search_path), a table and a view granted to PUBLIC and
--    a sequence. The same checks find every one of them open; after
--    _harden() none is, application grants are kept, the initial privileges
--    are those of a fresh install, and a second call changes nothing.
--  * _harden() refuses an object kind it cannot secure, and an owner role
--    that gained rights since the install.
BEGIN;
SELECT plan(30);
SET LOCAL client_min_messages = warning;

-- The extension's functions, tables, views and sequences that PUBLIC can use
-- or whose ACL is the default (NULL: a function's default lets PUBLIC execute).
CREATE FUNCTION pg_temp.open_to_public() RETURNS SETOF text LANGUAGE sql AS $$
    SELECT p.oid::regprocedure::text FROM pg_proc p
     WHERE p.pronamespace = 'sandbox_persist'::regnamespace
       AND (p.proacl IS NULL OR has_function_privilege('public', p.oid, 'EXECUTE'))
    UNION ALL
    SELECT c.oid::regclass::text FROM pg_class c
     WHERE c.relnamespace = 'sandbox_persist'::regnamespace AND c.relkind IN ('r', 'v', 'm', 'p', 'f')
       AND (c.relacl IS NULL
            OR has_table_privilege('public', c.oid,
                   'SELECT, INSERT, UPDATE, DELETE, TRUNCATE, REFERENCES, TRIGGER'))
    UNION ALL
    SELECT c.oid::regclass::text FROM pg_class c
     WHERE c.relnamespace = 'sandbox_persist'::regnamespace AND c.relkind = 'S'
       AND (c.relacl IS NULL
            OR CASE WHEN c.relkind = 'S'   -- guarded: the planner may test it on other rows first
                    THEN has_sequence_privilege('public', c.oid, 'USAGE, SELECT, UPDATE') END)
    ORDER BY 1
$$;
-- SECURITY DEFINER functions of the schema whose search_path is not exactly
-- pg_catalog, pg_temp.
CREATE FUNCTION pg_temp.unpinned() RETURNS SETOF text LANGUAGE sql AS $$
    SELECT p.oid::regprocedure::text FROM pg_proc p
     WHERE p.pronamespace = 'sandbox_persist'::regnamespace AND p.prosecdef
       AND ((SELECT count(*) FROM unnest(p.proconfig) s WHERE s LIKE 'search_path=%') <> 1
            OR NOT coalesce(p.proconfig @> ARRAY['search_path=pg_catalog, pg_temp'], false))
    ORDER BY 1
$$;
-- Members of the extension (relations and functions) as (classid, objid).
CREATE FUNCTION pg_temp.members() RETURNS TABLE (classid oid, objid oid) LANGUAGE sql AS $$
    SELECT d.classid, d.objid FROM pg_depend d
     WHERE d.refclassid = 'pg_extension'::regclass AND d.deptype = 'e'
       AND d.refobjid = (SELECT oid FROM pg_extension WHERE extname = 'sandbox_persist')
       AND d.classid IN ('pg_class'::regclass, 'pg_proc'::regclass)
$$;
-- Members not owned by sandbox_persist_owner.
CREATE FUNCTION pg_temp.foreign_owned() RETURNS SETOF text LANGUAGE sql AS $$
    SELECT pg_describe_object(m.classid, m.objid, 0) FROM pg_temp.members() m
      LEFT JOIN pg_class c ON m.classid = 'pg_class'::regclass AND c.oid = m.objid
      LEFT JOIN pg_proc p ON m.classid = 'pg_proc'::regclass AND p.oid = m.objid
     WHERE coalesce(c.relowner, p.proowner) <> 'sandbox_persist_owner'::regrole
     ORDER BY 1
$$;
-- Members and the schema whose initial privileges (what pg_dump compares
-- against) are not those of a fresh install: the owner's own, no PUBLIC
-- entry; on the schema, its owner's and the role's USAGE with grant option.
CREATE FUNCTION pg_temp.initprivs_off() RETURNS SETOF text LANGUAGE sql AS $$
    SELECT pg_describe_object(m.classid, m.objid, 0) FROM pg_temp.members() m
      LEFT JOIN pg_class c ON m.classid = 'pg_class'::regclass AND c.oid = m.objid
      LEFT JOIN pg_init_privs i ON i.classoid = m.classid AND i.objoid = m.objid AND i.objsubid = 0
     WHERE i.initprivs IS DISTINCT FROM ARRAY(
               SELECT a FROM unnest(acldefault(
                          CASE WHEN m.classid = 'pg_proc'::regclass THEN 'f'
                               WHEN c.relkind = 'S' THEN 's' ELSE 'r' END::"char",
                          'sandbox_persist_owner'::regrole)) a
                WHERE a::text !~ '^=')
    UNION ALL
    SELECT 'schema sandbox_persist' FROM pg_namespace n
      LEFT JOIN pg_init_privs i ON i.classoid = 'pg_namespace'::regclass AND i.objoid = n.oid
                               AND i.objsubid = 0
     WHERE n.nspname = 'sandbox_persist'
       AND i.initprivs IS DISTINCT FROM acldefault('n', n.nspowner)
               || makeaclitem('sandbox_persist_owner'::regrole, n.nspowner, 'USAGE', true)
    ORDER BY 1
$$;
-- Everything _harden() may change, as text, to show a second call changes nothing.
CREATE FUNCTION pg_temp.snapshot() RETURNS text LANGUAGE sql AS $$
    SELECT string_agg(x, E'\n' ORDER BY x) FROM (
        SELECT p.oid::regprocedure || ' ' || p.proowner::regrole || ' ' || coalesce(p.proacl::text, '-')
               || ' ' || coalesce(p.proconfig::text, '-') AS x
          FROM pg_proc p WHERE p.pronamespace = 'sandbox_persist'::regnamespace
        UNION ALL
        SELECT c.oid::regclass || ' ' || c.relowner::regrole || ' ' || coalesce(c.relacl::text, '-')
          FROM pg_class c WHERE c.relnamespace = 'sandbox_persist'::regnamespace
        UNION ALL
        SELECT 'schema ' || coalesce(nspacl::text, '-') FROM pg_namespace WHERE nspname = 'sandbox_persist'
        UNION ALL
        SELECT pg_describe_object(i.classoid, i.objoid, i.objsubid) || ' init ' || i.initprivs::text
          FROM pg_init_privs i
         WHERE (i.classoid, i.objoid) IN (SELECT * FROM pg_temp.members())
            OR (i.classoid = 'pg_namespace'::regclass AND i.objoid = 'sandbox_persist'::regnamespace)) s
$$;

------------------------------------------------------------------------------
-- As installed or upgraded.
------------------------------------------------------------------------------
SELECT is(ARRAY(SELECT pg_temp.open_to_public()), '{}'::text[],
    'H1 no function, table, view or sequence of the schema is usable by PUBLIC, and none has a default ACL');
SELECT is((SELECT count(*)::int FROM pg_namespace n, aclexplode(n.nspacl) a
            WHERE n.nspname = 'sandbox_persist' AND a.grantee = 0), 0,
    'H1.1 PUBLIC has no privilege on the schema');
SELECT is(ARRAY(SELECT pg_temp.unpinned()), '{}'::text[],
    'H2 every SECURITY DEFINER function pins search_path = pg_catalog, pg_temp, once');
SELECT is(ARRAY(SELECT pg_temp.foreign_owned()), '{}'::text[],
    'H3 sandbox_persist_owner owns every function, table, view and sequence of the extension');
SELECT is(ARRAY(SELECT pg_temp.initprivs_off()), '{}'::text[],
    'H4 the initial privileges of every object and of the schema are those of a fresh install');

SELECT ok((SELECT NOT prosecdef AND proconfig @> ARRAY['search_path=pg_catalog, pg_temp']
             FROM pg_proc WHERE oid = 'sandbox_persist._harden()'::regprocedure),
    'H5 _harden() runs as its caller (the superuser installing) with a pinned search_path');
SELECT is((SELECT proacl FROM pg_proc WHERE oid = 'sandbox_persist._harden()'::regprocedure),
    ARRAY[makeaclitem('sandbox_persist_owner'::regrole, 'sandbox_persist_owner'::regrole, 'EXECUTE', false)],
    'H5.1 _harden() is granted to no one (only its owner''s implicit right)');
SELECT isnt(obj_description('sandbox_persist._harden()'::regprocedure, 'pg_proc'), NULL,
    'H5.2 _harden() has a comment');
CREATE ROLE sp_harden_app NOLOGIN;
SELECT sandbox_persist.grant_app_role('sp_harden_app');
SELECT ok(NOT has_function_privilege('sp_harden_app', 'sandbox_persist._harden()', 'EXECUTE')
          AND has_function_privilege('sp_harden_app', 'sandbox_persist.run_get(text)', 'EXECUTE'),
    'H5.3 grant_app_role does not pass _harden() on');
SET LOCAL ROLE sp_harden_app;
SELECT throws_ok($$SELECT sandbox_persist._harden()$$, '42501', NULL,
    'H5.4 an application role cannot run _harden()');
RESET ROLE;

------------------------------------------------------------------------------
-- A later upgrade script adds objects and forgets to close them.
------------------------------------------------------------------------------
CREATE FUNCTION sandbox_persist.h_added(x integer) RETURNS integer
    LANGUAGE sql SECURITY DEFINER AS $$ SELECT x $$;
ALTER EXTENSION sandbox_persist ADD FUNCTION sandbox_persist.h_added(integer);
CREATE FUNCTION sandbox_persist.h_added_pinned_elsewhere() RETURNS integer
    LANGUAGE sql SECURITY DEFINER SET search_path = public AS $$ SELECT 1 $$;
ALTER EXTENSION sandbox_persist ADD FUNCTION sandbox_persist.h_added_pinned_elsewhere();
CREATE TABLE sandbox_persist.h_added_table (id bigint GENERATED ALWAYS AS IDENTITY, v text);
ALTER EXTENSION sandbox_persist ADD TABLE sandbox_persist.h_added_table;
ALTER EXTENSION sandbox_persist ADD SEQUENCE sandbox_persist.h_added_table_id_seq;
GRANT SELECT ON sandbox_persist.h_added_table TO PUBLIC;
CREATE VIEW sandbox_persist.h_added_view AS SELECT 1 AS one;
ALTER EXTENSION sandbox_persist ADD VIEW sandbox_persist.h_added_view;
GRANT SELECT ON sandbox_persist.h_added_view TO PUBLIC;
CREATE SEQUENCE sandbox_persist.h_added_seq;
ALTER EXTENSION sandbox_persist ADD SEQUENCE sandbox_persist.h_added_seq;

SELECT is(ARRAY(SELECT pg_temp.open_to_public()),
    ARRAY['sandbox_persist.h_added(integer)', 'sandbox_persist.h_added_pinned_elsewhere()',
          'sandbox_persist.h_added_seq', 'sandbox_persist.h_added_table',
          'sandbox_persist.h_added_table_id_seq', 'sandbox_persist.h_added_view'],
    'H6 the check finds every added object open: the functions executable by PUBLIC, the table and view granted, the sequences with a default ACL');
SELECT ok(has_function_privilege('public', 'sandbox_persist.h_added(integer)', 'EXECUTE'),
    'H6.1 (the added function is executable by PUBLIC, as CREATE FUNCTION leaves it)');
SELECT is(ARRAY(SELECT pg_temp.unpinned()),
    ARRAY['sandbox_persist.h_added(integer)', 'sandbox_persist.h_added_pinned_elsewhere()'],
    'H6.2 the check finds the SECURITY DEFINER functions without search_path = pg_catalog, pg_temp');
SELECT is(ARRAY(SELECT pg_temp.foreign_owned()),
    ARRAY['function sandbox_persist.h_added(integer)', 'function sandbox_persist.h_added_pinned_elsewhere()',
          'sequence sandbox_persist.h_added_seq', 'sequence sandbox_persist.h_added_table_id_seq',
          'table sandbox_persist.h_added_table', 'view sandbox_persist.h_added_view'],
    'H6.3 and the objects owned by the upgrading superuser');
SELECT is(ARRAY(SELECT pg_temp.initprivs_off()), ARRAY(SELECT pg_temp.foreign_owned()),
    'H6.4 and those same objects without the initial privileges of a fresh install');

SELECT lives_ok($$SELECT sandbox_persist._harden()$$, 'H7 _harden() runs');
SELECT is(ARRAY(SELECT pg_temp.open_to_public()), '{}'::text[],
    'H7.1 after _harden() nothing of the schema is usable by PUBLIC');
SELECT ok(NOT has_function_privilege('public', 'sandbox_persist.h_added(integer)', 'EXECUTE'),
    'H7.2 the added function is no longer executable by PUBLIC');
SELECT is(ARRAY(SELECT pg_temp.unpinned()), '{}'::text[],
    'H7.3 every SECURITY DEFINER function pins its search_path, a different one replaced');
SELECT is(ARRAY(SELECT pg_temp.foreign_owned()), '{}'::text[],
    'H7.4 sandbox_persist_owner owns the added objects');
SELECT is(ARRAY(SELECT pg_temp.initprivs_off()), '{}'::text[],
    'H7.5 the initial privileges of the added objects are those of a fresh install');
SELECT ok(has_function_privilege('sp_harden_app', 'sandbox_persist.run_get(text)', 'EXECUTE')
          AND has_schema_privilege('sp_harden_app', 'sandbox_persist', 'USAGE')
          AND NOT has_function_privilege('sp_harden_app', 'sandbox_persist.h_added(integer)', 'EXECUTE'),
    'H7.6 the application role granted before keeps what it had, and gets nothing new by itself');
SELECT lives_ok($$SELECT sandbox_persist.grant_app_role('sp_harden_app')$$,
    'H7.7 grant_app_role after the upgrade runs');
SELECT ok(has_function_privilege('sp_harden_app', 'sandbox_persist.h_added(integer)', 'EXECUTE'),
    'H7.8 and passes the added function on (the role owns it now)');
SELECT is((SELECT count(*)::int FROM pg_init_privs i, aclexplode(i.initprivs) a
            WHERE a.grantee = 'sp_harden_app'::regrole),
    0, 'H7.9 grants to the application role are not part of the initial privileges, so a dump carries them');

SELECT pg_temp.snapshot() AS before_second \gset
SELECT sandbox_persist._harden();
SELECT is(pg_temp.snapshot(), :'before_second', 'H8 a second _harden() changes nothing');

------------------------------------------------------------------------------
-- What _harden() refuses.
------------------------------------------------------------------------------
CREATE TYPE sandbox_persist.h_added_type AS ENUM ('a');
ALTER EXTENSION sandbox_persist ADD TYPE sandbox_persist.h_added_type;
-- PostgreSQL 17 and later also list the type's array type as a member.
SELECT throws_like($$SELECT sandbox_persist._harden()$$,
    'sandbox_persist._harden() does not know how to secure type sandbox_persist.h_added_type%',
    'H9 _harden() refuses an object kind it cannot secure (a type), naming it');
SELECT throws_ok($$SELECT sandbox_persist._harden()$$, '0A000', NULL,
    'H9.0 ... with SQLSTATE 0A000');
ALTER EXTENSION sandbox_persist DROP TYPE sandbox_persist.h_added_type;
DROP TYPE sandbox_persist.h_added_type;

ALTER ROLE sandbox_persist_owner LOGIN;
SELECT throws_ok($$SELECT sandbox_persist._harden()$$, '55000',
    'role sandbox_persist_owner exists and can log in',
    'H10 every upgrade re-checks the owner role: one that gained LOGIN is refused');
ALTER ROLE sandbox_persist_owner NOLOGIN;
SELECT is(pg_temp.snapshot(), :'before_second', 'H10.1 the refused calls changed nothing');

SELECT * FROM finish();
ROLLBACK;
