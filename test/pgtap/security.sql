-- Security baseline (docs/contract/README.md §2.9) and the administration
-- guards.
BEGIN;
SELECT plan(37);

SELECT is(
    (SELECT count(*)::int FROM pg_proc p
      WHERE p.pronamespace = 'sandbox_persist'::regnamespace AND NOT p.prosecdef
        AND p.proname NOT IN ('schedule_maintenance', 'unschedule_maintenance', '_harden')),
    0, 'SEC1 every store function is SECURITY DEFINER');
SELECT is(
    (SELECT count(*)::int FROM pg_proc p
      WHERE p.pronamespace = 'sandbox_persist'::regnamespace AND NOT p.prosecdef),
    3, 'SEC1.1 only schedule_maintenance, unschedule_maintenance and _harden (run by the superuser installing) run as their caller');

SELECT is(
    (SELECT count(*)::int FROM pg_proc p
      WHERE p.pronamespace = 'sandbox_persist'::regnamespace
        AND NOT coalesce(p.proconfig @> ARRAY['search_path=pg_catalog, pg_temp'], false)),
    0, 'SEC2 every function pins search_path = pg_catalog, pg_temp');

SELECT is(
    (SELECT count(*)::int FROM pg_proc p
      WHERE p.pronamespace = 'sandbox_persist'::regnamespace
        AND has_function_privilege('public', p.oid, 'EXECUTE')),
    0, 'SEC3 PUBLIC cannot execute any function');

SELECT is(
    (SELECT count(*)::int FROM pg_class c
      WHERE c.relnamespace = 'sandbox_persist'::regnamespace AND c.relkind IN ('r', 'v')
        AND (has_table_privilege('public', c.oid, 'SELECT')
             OR has_table_privilege('public', c.oid, 'INSERT')
             OR has_table_privilege('public', c.oid, 'UPDATE')
             OR has_table_privilege('public', c.oid, 'DELETE'))),
    0, 'SEC4 PUBLIC has no table privileges');

SELECT is(
    (SELECT count(*)::int FROM pg_class c
      WHERE c.relnamespace = 'sandbox_persist'::regnamespace AND c.relkind = 'r'
        AND c.oid <> ALL ((SELECT extconfig FROM pg_extension
                            WHERE extname = 'sandbox_persist')::oid[])),
    0, 'SEC5 every data table is registered with pg_extension_config_dump');

SELECT is(
    (SELECT count(*)::int FROM pg_class c
      WHERE c.relnamespace = 'sandbox_persist'::regnamespace AND c.relkind = 'S'
        AND c.oid <> ALL ((SELECT extconfig FROM pg_extension
                            WHERE extname = 'sandbox_persist')::oid[])),
    0, 'SEC5.1 every sequence, identity sequences included, is registered with pg_extension_config_dump');
SELECT is(
    (SELECT string_agg(c.relname, ',' ORDER BY c.relname) FROM pg_class c
      WHERE c.relnamespace = 'sandbox_persist'::regnamespace AND c.relkind = 'S'
        AND EXISTS (SELECT 1 FROM pg_depend d WHERE d.classid = 'pg_class'::regclass
                       AND d.objid = c.oid AND d.deptype = 'i')),
    'event_logs_log_id_seq,generation_runs_seq_seq,interrupts_seq_seq,runs_seq_seq,streams_stream_id_seq',
    'SEC5.2 the identity sequences are among them (checkpoints.seq was dropped in 0.3.0, conversation_messages in 0.5.0)');

------------------------------------------------------------------------------
-- The functions run as the dedicated role sandbox_persist_owner, not as a
-- superuser.
------------------------------------------------------------------------------
-- Objects (relations and functions) of the extension, as (classid, objid).
CREATE FUNCTION pg_temp.members() RETURNS TABLE (classid oid, objid oid) LANGUAGE sql AS $$
    SELECT d.classid, d.objid FROM pg_depend d
     WHERE d.refclassid = 'pg_extension'::regclass AND d.deptype = 'e'
       AND d.refobjid = (SELECT oid FROM pg_extension WHERE extname = 'sandbox_persist')
       AND d.classid IN ('pg_class'::regclass, 'pg_proc'::regclass)
$$;
SELECT is(
    (SELECT count(*)::int FROM pg_proc p
      WHERE p.pronamespace = 'sandbox_persist'::regnamespace AND p.prosecdef
        AND p.proowner <> 'sandbox_persist_owner'::regrole),
    0, 'SEC8 every SECURITY DEFINER function is owned by sandbox_persist_owner');
SELECT ok(
    (SELECT count(*) FROM pg_proc p
      WHERE p.pronamespace = 'sandbox_persist'::regnamespace AND p.prosecdef) >= 70,
    'SEC8.1 that is every store function (70 or more)');
SELECT is(
    (SELECT count(*)::int FROM pg_temp.members() m
      LEFT JOIN pg_class c ON m.classid = 'pg_class'::regclass AND c.oid = m.objid
      LEFT JOIN pg_proc p ON m.classid = 'pg_proc'::regclass AND p.oid = m.objid
      WHERE coalesce(c.relowner, p.proowner) <> 'sandbox_persist_owner'::regrole),
    0, 'SEC8.2 the role owns every table, sequence, view and function of the extension');
SELECT ok(
    (SELECT NOT (rolsuper OR rolcanlogin OR rolcreatedb OR rolcreaterole OR rolreplication
                 OR rolbypassrls)
       FROM pg_roles WHERE rolname = 'sandbox_persist_owner'),
    'SEC9 the role is no superuser, cannot log in, create databases or roles, replicate or bypass RLS');
SELECT is(
    (SELECT count(*)::int FROM pg_auth_members
      WHERE member = 'sandbox_persist_owner'::regrole OR roleid = 'sandbox_persist_owner'::regrole),
    0, 'SEC9.1 the role is a member of no role and has no members');
SELECT isnt(shobj_description('sandbox_persist_owner'::regrole, 'pg_authid'), NULL,
    'SEC9.2 the role has a comment');
SELECT is(
    (SELECT count(*)::int FROM pg_shdepend s
      WHERE s.refclassid = 'pg_authid'::regclass AND s.refobjid = 'sandbox_persist_owner'::regrole
        AND s.deptype = 'o'
        AND (s.dbid = 0
             OR (s.dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
                 AND (s.classid, s.objid) NOT IN (SELECT * FROM pg_temp.members())))),
    0, 'SEC10 the role owns nothing in this database but the extension''s objects, and no shared object');
SELECT ok(NOT has_schema_privilege('sandbox_persist_owner', 'sandbox_persist', 'CREATE')
    AND NOT has_database_privilege('sandbox_persist_owner', current_database(), 'CREATE'),
    'SEC10.1 the role cannot create objects in the schema or the database');
SELECT is(
    (SELECT count(*)::int FROM pg_init_privs i JOIN pg_temp.members() m
         ON i.classoid = m.classid AND i.objoid = m.objid AND i.objsubid = 0
       LEFT JOIN pg_class c ON m.classid = 'pg_class'::regclass AND c.oid = m.objid
      WHERE i.initprivs IS DISTINCT FROM ARRAY(
                SELECT a FROM unnest(acldefault(
                           CASE WHEN m.classid = 'pg_proc'::regclass THEN 'f'
                                WHEN c.relkind = 'S' THEN 's' ELSE 'r' END::"char",
                           'sandbox_persist_owner'::regrole)) a
                 WHERE a::text !~ '^=')),
    0, 'SEC10.2 the initial privileges pg_dump compares against are the role''s own, so a dump carries only grants made since');

CREATE ROLE sp_test_app NOLOGIN;
SELECT lives_ok($$SELECT sandbox_persist.grant_app_role('sp_test_app')$$,
    'SEC6.1 grant_app_role runs');
SELECT ok(has_function_privilege('sp_test_app',
    'sandbox_persist.run_create_or_resume(json)', 'EXECUTE')
    AND has_function_privilege('sp_test_app',
    'sandbox_persist.checkpoint_fork_from_checkpoint(json, bigint)', 'EXECUTE')
    AND has_schema_privilege('sp_test_app', 'sandbox_persist', 'USAGE'),
    'SEC6.2 the app role can call the store functions');
SELECT ok(NOT has_function_privilege('sp_test_app',
    'sandbox_persist._reset_for_tests()', 'EXECUTE')
    AND NOT has_function_privilege('sp_test_app',
    'sandbox_persist.grant_app_role(regrole)', 'EXECUTE'),
    'SEC6.3 the app role gets no administration function');
SELECT ok(NOT has_table_privilege('sp_test_app', 'sandbox_persist.runs', 'SELECT'),
    'SEC6.4 the app role cannot read tables directly');

SET LOCAL ROLE sp_test_app;
SELECT lives_ok($$SELECT sandbox_persist.run_create_or_resume(
    '{"runId":"sec-run","threadId":"sec-thread","startedAt":1}')$$,
    'SEC7 the app role writes through the functions');
SELECT is(sandbox_persist.run_get('sec-run')->>'threadId', 'sec-thread',
    'SEC7.1 and reads through them');
SELECT throws_ok($$SELECT * FROM sandbox_persist.runs$$, '42501', NULL,
    'SEC7.2 but cannot read a table directly');
SELECT throws_ok($$DELETE FROM sandbox_persist.locks$$, '42501', NULL,
    'SEC7.3 nor write one');
SELECT throws_ok($$SELECT nextval('sandbox_persist.lock_fences')$$, '42501', NULL,
    'SEC7.4 nor use a sequence');
RESET ROLE;
SELECT is(
    (SELECT count(*)::int FROM pg_class c
      WHERE c.relnamespace = 'sandbox_persist'::regnamespace AND c.relkind IN ('r', 'v', 'S')
        AND (has_table_privilege('sp_test_app', c.oid, 'SELECT')
             OR has_table_privilege('sp_test_app', c.oid, 'INSERT')
             OR has_table_privilege('sp_test_app', c.oid, 'UPDATE')
             OR has_table_privilege('sp_test_app', c.oid, 'DELETE'))),
    0, 'SEC7.5 the app role has no privilege on any table, view or sequence');

SET LOCAL sandbox_persist.allow_test_reset = off;
SELECT throws_ok($$SELECT sandbox_persist._reset_for_tests()$$, 'SP902', NULL,
    'V27 _reset_for_tests while allow_test_reset is off -> SP902');
SELECT is((SELECT count(*)::int FROM sandbox_persist.runs WHERE run_id = 'sec-run'), 1,
    'V27.1 the refused reset changed nothing');


------------------------------------------------------------------------------
-- The role is cluster-wide: a re-install reuses it; a role of that name with
-- more rights than the extension needs is refused.
------------------------------------------------------------------------------
SELECT oid AS owner_oid FROM pg_roles WHERE rolname = 'sandbox_persist_owner' \gset
DROP EXTENSION sandbox_persist;
SELECT is((SELECT oid FROM pg_roles WHERE rolname = 'sandbox_persist_owner'), :owner_oid::oid,
    'SEC11 DROP EXTENSION keeps the role (other databases may use it)');
ALTER ROLE sandbox_persist_owner LOGIN;
SELECT throws_ok($$CREATE EXTENSION sandbox_persist$$, '55000',
    'role sandbox_persist_owner exists and can log in',
    'SEC12 CREATE EXTENSION refuses a role of that name that can log in');
ALTER ROLE sandbox_persist_owner NOLOGIN SUPERUSER;
SELECT throws_ok($$CREATE EXTENSION sandbox_persist$$, '55000',
    'role sandbox_persist_owner exists and is a superuser',
    'SEC12.1 and one that is a superuser');
ALTER ROLE sandbox_persist_owner NOSUPERUSER CREATEROLE;
SELECT throws_ok($$CREATE EXTENSION sandbox_persist$$, '55000',
    'role sandbox_persist_owner exists and can create roles',
    'SEC12.2 and one that can create roles');
ALTER ROLE sandbox_persist_owner NOCREATEROLE;
GRANT sandbox_persist_owner TO sp_test_app;
SELECT throws_ok($$CREATE EXTENSION sandbox_persist$$, '55000',
    'role sandbox_persist_owner exists and has members',
    'SEC12.3 and one granted to another role');
REVOKE sandbox_persist_owner FROM sp_test_app;
SELECT lives_ok($$CREATE EXTENSION sandbox_persist$$,
    'SEC13 CREATE EXTENSION after DROP EXTENSION succeeds');
SELECT is((SELECT oid FROM pg_roles WHERE rolname = 'sandbox_persist_owner'), :owner_oid::oid,
    'SEC13.1 and reuses the role');
SELECT is(
    (SELECT count(*)::int FROM pg_proc p
      WHERE p.pronamespace = 'sandbox_persist'::regnamespace
        AND p.proowner <> :owner_oid::oid),
    0, 'SEC13.2 the new functions are owned by it');

SELECT * FROM finish();
ROLLBACK;
