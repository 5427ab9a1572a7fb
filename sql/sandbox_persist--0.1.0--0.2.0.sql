-- sandbox_persist 0.1.0 -> 0.2.0. CREATE EXTENSION runs 0.1.0 and then this
-- script; ALTER EXTENSION sandbox_persist UPDATE runs it on a 0.1.0 database.
--   * every sequence, identity sequences included, is registered for pg_dump,
--     so a restored database goes on numbering where the original stopped;
--   * the functions run as a dedicated role, sandbox_persist_owner, that owns
--     the extension's objects and nothing else, instead of as the superuser who
--     created the extension.
\echo Use "ALTER EXTENSION sandbox_persist UPDATE" to load this file. \quit

------------------------------------------------------------------------------
-- pg_dump keeps the position of every sequence. 0.1.0 registered the explicit
-- ones (blob_versions, blob_etags, lock_fences) but not those behind the
-- GENERATED ... AS IDENTITY columns (runs.seq, conversation_messages.message_id,
-- checkpoints.seq, interrupts.seq, generation_runs.seq, event_logs.log_id):
-- a restore started them at 1 again. Identity sequences are members of the
-- extension, so pg_extension_config_dump takes them; pg_dump then emits a
-- setval for each.
------------------------------------------------------------------------------
DO $$
DECLARE
    seq regclass;
BEGIN
    FOR seq IN
        SELECT c.oid::regclass
          FROM pg_catalog.pg_depend d
          JOIN pg_catalog.pg_class c ON c.oid = d.objid
         WHERE d.classid = 'pg_catalog.pg_class'::regclass
           AND d.refclassid = 'pg_catalog.pg_extension'::regclass
           AND d.refobjid = (SELECT oid FROM pg_catalog.pg_extension
                              WHERE extname = 'sandbox_persist')
           AND d.deptype = 'e' AND c.relkind = 'S'
         ORDER BY c.relname
    LOOP
        PERFORM pg_catalog.pg_extension_config_dump(seq, '');
    END LOOP;
END
$$;

------------------------------------------------------------------------------
-- The function owner. Every SECURITY DEFINER function runs as this role, so a
-- defect in one can reach the extension's own tables and nothing else. It is
-- a cluster-wide object: the first database to install the extension creates
-- it, every later one (another database, a restore, a re-install) reuses it.
-- A role of that name that could log in or holds any privileged attribute or
-- membership is refused: it would widen what the functions can do.
------------------------------------------------------------------------------
DO $$
DECLARE
    r pg_catalog.pg_roles%ROWTYPE;
    problems text[] := '{}';
BEGIN
    SELECT * INTO r FROM pg_catalog.pg_roles WHERE rolname = 'sandbox_persist_owner';
    IF NOT FOUND THEN
        CREATE ROLE sandbox_persist_owner NOLOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE
            NOREPLICATION NOBYPASSRLS NOINHERIT;
        COMMENT ON ROLE sandbox_persist_owner IS
            'Owner of the sandbox_persist extension''s objects: its SECURITY DEFINER functions run as this role. Not a login role; never grant it to anyone.';
        RETURN;
    END IF;
    IF r.rolsuper THEN problems := problems || 'is a superuser'::text; END IF;
    IF r.rolcanlogin THEN problems := problems || 'can log in'::text; END IF;
    IF r.rolcreatedb THEN problems := problems || 'can create databases'::text; END IF;
    IF r.rolcreaterole THEN problems := problems || 'can create roles'::text; END IF;
    IF r.rolreplication THEN problems := problems || 'is a replication role'::text; END IF;
    IF r.rolbypassrls THEN problems := problems || 'bypasses row-level security'::text; END IF;
    IF EXISTS (SELECT 1 FROM pg_catalog.pg_auth_members WHERE member = r.oid) THEN
        problems := problems || 'is a member of other roles'::text;
    END IF;
    IF EXISTS (SELECT 1 FROM pg_catalog.pg_auth_members WHERE roleid = r.oid) THEN
        problems := problems || 'has members'::text;
    END IF;
    IF cardinality(problems) > 0 THEN
        RAISE EXCEPTION 'role sandbox_persist_owner exists and %', array_to_string(problems, ', ')
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  DETAIL = 'The extension''s functions run as this role, so it must be a NOLOGIN role without SUPERUSER, CREATEDB, CREATEROLE, REPLICATION, BYPASSRLS or role memberships.',
                  HINT = 'Drop that role, or make it NOLOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION NOBYPASSRLS without memberships, and run the command again.';
    END IF;
END
$$;

-- The role reaches its tables through the schema; the grant option lets
-- grant_app_role (which runs as the role) pass USAGE on to an application role.
GRANT USAGE ON SCHEMA sandbox_persist TO sandbox_persist_owner WITH GRANT OPTION;

-- Hand every object of the extension to the role: tables (their indexes and
-- identity sequences follow), the explicit sequences, the views, the
-- functions. Privileges granted to application roles move with them.
DO $$
DECLARE
    obj record;
BEGIN
    FOR obj IN
        SELECT c.oid::regclass AS rel, c.relkind
          FROM pg_catalog.pg_depend d
          JOIN pg_catalog.pg_class c ON c.oid = d.objid
         WHERE d.classid = 'pg_catalog.pg_class'::regclass
           AND d.refclassid = 'pg_catalog.pg_extension'::regclass
           AND d.refobjid = (SELECT oid FROM pg_catalog.pg_extension
                              WHERE extname = 'sandbox_persist')
           AND d.deptype = 'e'
           AND NOT EXISTS (SELECT 1 FROM pg_catalog.pg_depend i
                            WHERE i.classid = 'pg_catalog.pg_class'::regclass AND i.objid = c.oid
                              AND i.refclassid = 'pg_catalog.pg_class'::regclass
                              AND i.deptype = 'i')
         ORDER BY c.relname
    LOOP
        EXECUTE format('ALTER %s %s OWNER TO sandbox_persist_owner',
                       CASE obj.relkind WHEN 'S' THEN 'SEQUENCE' WHEN 'v' THEN 'VIEW'
                                        ELSE 'TABLE' END, obj.rel);
    END LOOP;
    FOR obj IN
        SELECT p.oid::regprocedure AS fn
          FROM pg_catalog.pg_depend d
          JOIN pg_catalog.pg_proc p ON p.oid = d.objid
         WHERE d.classid = 'pg_catalog.pg_proc'::regclass
           AND d.refclassid = 'pg_catalog.pg_extension'::regclass
           AND d.refobjid = (SELECT oid FROM pg_catalog.pg_extension
                              WHERE extname = 'sandbox_persist')
           AND d.deptype = 'e'
         ORDER BY p.proname
    LOOP
        EXECUTE format('ALTER FUNCTION %s OWNER TO sandbox_persist_owner', obj.fn);
    END LOOP;
END
$$;

-- The initial privileges pg_dump compares against (pg_init_privs). A dump
-- carries only the differences from them, and a restore re-creates the
-- extension and then applies those differences, so they must be exactly what
-- an installation sets up: the owner's own privileges on every object, and
-- the role's USAGE on the schema. PostgreSQL 15 keeps them when an owner
-- changes (they would still name the old owner, and every dump would revoke
-- from it), and any GRANT or REVOKE inside this script would record the whole
-- current ACL, grants an application role received under 0.1.0 included,
-- which a dump would then silently leave out. So they are set directly.
UPDATE pg_catalog.pg_init_privs ip
   SET initprivs = ARRAY(
           SELECT a FROM unnest(pg_catalog.acldefault(
                      CASE WHEN ip.classoid = 'pg_catalog.pg_proc'::regclass THEN 'f'
                           WHEN c.relkind = 'S' THEN 's' ELSE 'r' END::"char",
                      'sandbox_persist_owner'::regrole::oid)) AS a
            WHERE a::text !~ '^=')   -- no PUBLIC entry: 0.1.0 revoked those
  FROM pg_catalog.pg_depend d
  LEFT JOIN pg_catalog.pg_class c
         ON d.classid = 'pg_catalog.pg_class'::regclass AND c.oid = d.objid
 WHERE d.refclassid = 'pg_catalog.pg_extension'::regclass
   AND d.refobjid = (SELECT oid FROM pg_catalog.pg_extension WHERE extname = 'sandbox_persist')
   AND d.deptype = 'e'
   AND d.classid IN ('pg_catalog.pg_class'::regclass, 'pg_catalog.pg_proc'::regclass)
   AND ip.classoid = d.classid AND ip.objoid = d.objid AND ip.objsubid = 0;
UPDATE pg_catalog.pg_init_privs ip
   SET initprivs = pg_catalog.acldefault('n'::"char", n.nspowner)
                   || pg_catalog.makeaclitem('sandbox_persist_owner'::regrole::oid, n.nspowner,
                                             'USAGE', true)
  FROM pg_catalog.pg_namespace n
 WHERE n.nspname = 'sandbox_persist'
   AND ip.classoid = 'pg_catalog.pg_namespace'::regclass AND ip.objoid = n.oid
   AND ip.objsubid = 0;
