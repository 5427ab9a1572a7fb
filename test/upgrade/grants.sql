-- Upgrade suite: what the application role :app may use, as lines
-- "G\tgrants\t<label>\t<result>" like the store reads: the functions it may
-- execute, the schema, and any table, view or sequence (none).
\set ON_ERROR_STOP 1
\set QUIET 1
\pset format unaligned
\pset tuples_only on
\pset fieldsep '\t'
SET client_min_messages = warning;
SELECT 'G', 'grants', 'functions the application role may execute',
       string_agg(p.oid::regprocedure::text, ' ' ORDER BY p.oid::regprocedure::text)
  FROM pg_catalog.pg_proc p
 WHERE p.pronamespace = 'sandbox_persist'::regnamespace
   AND pg_catalog.has_function_privilege(:'app', p.oid, 'EXECUTE');
SELECT 'G', 'grants', 'functions PUBLIC may execute',
       coalesce(string_agg(p.oid::regprocedure::text, ' ' ORDER BY p.oid::regprocedure::text), '(none)')
  FROM pg_catalog.pg_proc p
 WHERE p.pronamespace = 'sandbox_persist'::regnamespace
   AND pg_catalog.has_function_privilege('public', p.oid, 'EXECUTE');
SELECT 'G', 'grants', 'schema usage', pg_catalog.has_schema_privilege(:'app', 'sandbox_persist', 'USAGE');
SELECT 'G', 'grants', 'relations the application role may use',
       coalesce(string_agg(c.oid::regclass::text, ' ' ORDER BY c.oid::regclass::text), '(none)')
  FROM pg_catalog.pg_class c
 WHERE c.relnamespace = 'sandbox_persist'::regnamespace AND c.relkind IN ('r', 'v', 'S')
   AND (pg_catalog.has_table_privilege(:'app', c.oid,
            'SELECT, INSERT, UPDATE, DELETE, TRUNCATE, REFERENCES, TRIGGER')
        OR CASE WHEN c.relkind = 'S' THEN pg_catalog.has_sequence_privilege(:'app', c.oid, 'USAGE') END);
