-- pgTAP: the installation itself (docs/contract/README.md §8.2), the file of
-- scripts/conformance.sh that any role may run, superuser or not: the
-- extension is installed, at the version its installed files offer, and a
-- store call round-trips for this role. Cases INS1-INS3.
-- One transaction, rolled back: the round trip leaves nothing behind.
-- Run with: pg_prove -d <db> test/conformance/installed.sql
BEGIN;
SELECT plan(4);

SELECT ok(EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'sandbox_persist'),
    'INS1 sandbox_persist is installed in this database');

SELECT is((SELECT extversion FROM pg_extension WHERE extname = 'sandbox_persist'),
          (SELECT default_version FROM pg_available_extensions WHERE name = 'sandbox_persist'),
    'INS2 the installed version is the one the installed files offer (else: ALTER EXTENSION sandbox_persist UPDATE)');

SELECT has_function_privilege('sandbox_persist.instance_upsert(json)', 'EXECUTE')
   AND has_function_privilege('sandbox_persist.instance_get(text)', 'EXECUTE') AS may_call \gset
\if :may_call
SELECT lives_ok($$SELECT sandbox_persist.instance_upsert('{"key":"sp-conformance-ins3","provider":"conformance","providerSandboxId":"sb","threadId":"sp-conformance-ins3","updatedAt":1}')$$,
    'INS3.1 a store call runs for this role (the library loads)');
SELECT is(sandbox_persist.instance_get('sp-conformance-ins3')->>'providerSandboxId', 'sb',
    'INS3.2 and its record reads back (rolled back at the end of this file)');
\else
SELECT skip('this role may not call the stores: a superuser grants it with SELECT sandbox_persist.grant_app_role(''<role>'')', 2);
\endif

SELECT * FROM finish();
ROLLBACK;
