-- Security baseline (design.md section 9) and the administration guards.
BEGIN;
SELECT plan(13);

SELECT is(
    (SELECT count(*)::int FROM pg_proc p
      WHERE p.pronamespace = 'sandbox_persist'::regnamespace AND NOT p.prosecdef
        AND p.proname NOT IN ('schedule_maintenance', 'unschedule_maintenance')),
    0, 'SEC1 every store function is SECURITY DEFINER');
SELECT is(
    (SELECT count(*)::int FROM pg_proc p
      WHERE p.pronamespace = 'sandbox_persist'::regnamespace AND NOT p.prosecdef),
    2, 'SEC1.1 only schedule_maintenance and unschedule_maintenance run as their caller');

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
RESET ROLE;

SET LOCAL sandbox_persist.allow_test_reset = off;
SELECT throws_ok($$SELECT sandbox_persist._reset_for_tests()$$, 'SP902', NULL,
    'V27 _reset_for_tests while allow_test_reset is off -> SP902');
SELECT is((SELECT count(*)::int FROM sandbox_persist.runs WHERE run_id = 'sec-run'), 1,
    'V27.1 the refused reset changed nothing');

SELECT * FROM finish();
ROLLBACK;
