-- pgTAP: withdrawing what grant_app_role gave (SEC14). grant_app_role runs as
-- sandbox_persist_owner, so its grants have that role as grantor; the schema
-- belongs to the installing superuser, and DROP OWNED BY (run by a superuser)
-- revokes only the grants the owner made, so before 0.3.0 the schema's USAGE
-- survived it and DROP ROLE failed. revoke_app_role withdraws every grant
-- grant_app_role made.
BEGIN;
SELECT plan(9);

CREATE ROLE sp_app_role_test NOLOGIN;
SELECT sandbox_persist.grant_app_role('sp_app_role_test');
SELECT ok(has_schema_privilege('sp_app_role_test', 'sandbox_persist', 'USAGE'),
    'SEC14 set-up: grant_app_role gave the schema');

SELECT ok(NOT has_function_privilege('sp_app_role_test',
        'sandbox_persist.revoke_app_role(regrole)', 'EXECUTE'),
    'SEC14.1 grant_app_role does not give revoke_app_role to the application');
SELECT is(
    (SELECT count(*)::int FROM pg_proc p
      WHERE p.pronamespace = 'sandbox_persist'::regnamespace
        AND has_function_privilege('public', p.oid, 'EXECUTE')
        AND p.proname = 'revoke_app_role'),
    0, 'SEC14.2 PUBLIC cannot execute revoke_app_role');

SELECT lives_ok($$SELECT sandbox_persist.revoke_app_role('sp_app_role_test')$$,
    'SEC14.3 revoke_app_role runs');
SELECT ok(NOT has_schema_privilege('sp_app_role_test', 'sandbox_persist', 'USAGE'),
    'SEC14.4 the schema''s USAGE is withdrawn');
SELECT is(
    (SELECT count(*)::int FROM pg_proc p
      WHERE p.pronamespace = 'sandbox_persist'::regnamespace
        AND has_function_privilege('sp_app_role_test', p.oid, 'EXECUTE')),
    0, 'SEC14.5 and EXECUTE on every function');
SELECT lives_ok($$DROP ROLE sp_app_role_test$$,
    'SEC14.6 the role can then be dropped without DROP OWNED BY');

SELECT throws_ok($$SELECT sandbox_persist.revoke_app_role(0::regrole)$$, '22023', NULL,
    'SEC14.7 an unknown role is refused');
SELECT throws_ok($$SELECT sandbox_persist.revoke_app_role('sandbox_persist_owner')$$, '22023', NULL,
    'SEC14.8 and so is the owner role, which would break every function');

SELECT * FROM finish();
ROLLBACK;
