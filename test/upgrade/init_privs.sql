-- Upgrade suite, initial privileges (docs/architecture.md, "Initial
-- privileges"): one line per stale or missing record, for this database,
-- about the extension's schema, its members, and any object that is gone.
--  * a pg_init_privs row for a relation, function or schema that no longer
--    exists;
--  * a pg_shdepend entry of type 'i' (PostgreSQL 17 and later: a role named
--    by an object's initial privileges) whose role those privileges no
--    longer name, or whose object is gone: it would keep DROP ROLE from
--    succeeding;
--  * on 17 and later, a role other than the owner named by the initial
--    privileges of the schema or a member without its 'i' entry.
-- Prints nothing when everything is consistent.
\set ON_ERROR_STOP 1
\set QUIET 1
\pset format unaligned
\pset tuples_only on
SET client_min_messages = warning;

WITH ours(classoid, objoid, owner) AS (
    SELECT 'pg_catalog.pg_class'::regclass, c.oid, c.relowner
      FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
     WHERE n.nspname = 'sandbox_persist'
    UNION ALL
    SELECT 'pg_catalog.pg_proc'::regclass, p.oid, p.proowner
      FROM pg_catalog.pg_proc p JOIN pg_catalog.pg_namespace n ON n.oid = p.pronamespace
     WHERE n.nspname = 'sandbox_persist'
    UNION ALL
    SELECT 'pg_catalog.pg_namespace'::regclass, n.oid, n.nspowner
      FROM pg_catalog.pg_namespace n WHERE n.nspname = 'sandbox_persist'),
existing(classoid, objoid) AS (
    SELECT 'pg_catalog.pg_class'::regclass, oid FROM pg_catalog.pg_class
    UNION ALL SELECT 'pg_catalog.pg_proc'::regclass, oid FROM pg_catalog.pg_proc
    UNION ALL SELECT 'pg_catalog.pg_namespace'::regclass, oid FROM pg_catalog.pg_namespace),
this_db AS (SELECT oid FROM pg_catalog.pg_database WHERE datname = current_database()),
named(classoid, objoid, objsubid, role) AS (
    SELECT i.classoid, i.objoid, i.objsubid, r
      FROM pg_catalog.pg_init_privs i, pg_catalog.aclexplode(i.initprivs) a,
           unnest(ARRAY[a.grantor, a.grantee]) AS r
     WHERE r <> 0)
SELECT problem FROM (
    SELECT 'pg_init_privs row of a dropped object: ' || i.classoid::regclass || ' ' || i.objoid AS problem
      FROM pg_catalog.pg_init_privs i
     WHERE i.classoid IN ('pg_catalog.pg_class'::regclass, 'pg_catalog.pg_proc'::regclass,
                          'pg_catalog.pg_namespace'::regclass)
       AND NOT EXISTS (SELECT 1 FROM existing e WHERE e.classoid = i.classoid AND e.objoid = i.objoid)
    UNION ALL
    SELECT 'pg_shdepend initial-privileges entry not backed by pg_init_privs: '
           || coalesce(pg_catalog.pg_describe_object(s.classid, s.objid, s.objsubid),
                       s.classid::regclass || ' ' || s.objid)
           || ' -> ' || s.refobjid::regrole
      FROM pg_catalog.pg_shdepend s, this_db
     WHERE s.dbid = this_db.oid AND s.deptype = 'i'
       AND NOT EXISTS (SELECT 1 FROM named x
                        WHERE x.classoid = s.classid AND x.objoid = s.objid
                          AND x.objsubid = s.objsubid AND x.role = s.refobjid)
    UNION ALL
    SELECT DISTINCT 'initial privileges of ' || pg_catalog.pg_describe_object(x.classoid, x.objoid, x.objsubid)
           || ' name ' || x.role::regrole || ' without a pg_shdepend entry'
      FROM named x JOIN ours o ON o.classoid = x.classoid AND o.objoid = x.objoid, this_db
     WHERE pg_catalog.current_setting('server_version_num')::int >= 170000
       AND x.role <> o.owner
       AND NOT EXISTS (SELECT 1 FROM pg_catalog.pg_shdepend s
                        WHERE s.dbid = this_db.oid AND s.deptype = 'i' AND s.classid = x.classoid
                          AND s.objid = x.objoid AND s.objsubid = x.objsubid AND s.refobjid = x.role)
) p ORDER BY 1;
