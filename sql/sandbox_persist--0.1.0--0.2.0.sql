-- sandbox_persist 0.1.0 -> 0.2.0. CREATE EXTENSION runs 0.1.0 and then this
-- script; ALTER EXTENSION sandbox_persist UPDATE runs it on a 0.1.0 database.
--   * every sequence, identity sequences included, is registered for pg_dump,
--     so a restored database goes on numbering where the original stopped;
--   * the functions run as a dedicated role, sandbox_persist_owner, that owns
--     the extension's objects and nothing else, instead of as the superuser who
--     created the extension;
--   * the security set-up lives in one routine, sandbox_persist._harden(),
--     which this script calls at its end.
--
-- EVERY LATER UPGRADE SCRIPT (sandbox_persist--A--B.sql) MUST END WITH
--     SELECT sandbox_persist._harden();
-- It revokes PUBLIC from every function, table, view and sequence of the
-- extension, pins the search_path of every SECURITY DEFINER function, hands
-- every object to sandbox_persist_owner and resets the initial privileges
-- pg_dump compares against; a function the script adds is then as closed as
-- the ones 0.1.0 shipped. A script that changes the routine replaces it
-- (CREATE OR REPLACE FUNCTION) before that call. test/upgrade/ checks that
-- every upgrade script ends with the call.
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
-- The hardening routine. Idempotent: it changes only what differs from the
-- hardened state, so it can run at the end of every upgrade script.
--
-- The function owner: every SECURITY DEFINER function runs as the dedicated
-- role sandbox_persist_owner, so a defect in one can reach the extension's own
-- tables and nothing else. It is a cluster-wide object: the first database to
-- install the extension creates it, every later one (another database, a
-- restore, a re-install) reuses it. A role of that name that could log in or
-- holds any privileged attribute or membership is refused: it would widen what
-- the functions can do.
--
-- The initial privileges pg_dump compares against (pg_init_privs). A dump
-- carries only the differences from them, and a restore re-creates the
-- extension and then applies those differences, so they must be exactly what
-- an installation sets up: the owner's own privileges on every object, and
-- the role's USAGE on the schema. PostgreSQL 15 keeps them when an owner
-- changes (they would still name the old owner, and every dump would revoke
-- from it), and any GRANT or REVOKE inside an extension script records the
-- whole current ACL, grants an application role received earlier included,
-- which a dump would then silently leave out. So they are set directly, last.
--
-- SECURITY INVOKER: it changes owners and writes pg_init_privs, which only
-- the superuser running CREATE or ALTER EXTENSION may do. Granted to no one.
------------------------------------------------------------------------------
CREATE FUNCTION _harden() RETURNS void
LANGUAGE plpgsql VOLATILE SECURITY INVOKER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    ext oid;
    r pg_catalog.pg_roles%ROWTYPE;
    problems text[] := '{}';
    obj record;
    pinned constant text := 'search_path=pg_catalog, pg_temp';
    left_open text;
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_roles
                    WHERE rolname = current_user AND rolsuper) THEN
        RAISE EXCEPTION 'sandbox_persist._harden() must be run by a superuser'
            USING ERRCODE = 'insufficient_privilege',
                  DETAIL = 'It changes the owners of the extension''s objects and their initial privileges.',
                  HINT = 'It runs at the end of the extension''s install and upgrade scripts.';
    END IF;
    SELECT oid INTO ext FROM pg_catalog.pg_extension WHERE extname = 'sandbox_persist';

    -- Objects of a kind this routine does not know how to close are refused:
    -- the upgrade that adds one must extend the routine first. The row types
    -- of tables and views, and their array types, follow their relation
    -- (owner included); PostgreSQL 17 and later list them as extension
    -- members of their own.
    SELECT string_agg(pg_catalog.pg_describe_object(d.classid, d.objid, d.objsubid), ', ')
      INTO left_open
      FROM pg_catalog.pg_depend d
      LEFT JOIN pg_catalog.pg_class c ON d.classid = 'pg_catalog.pg_class'::regclass AND c.oid = d.objid
     WHERE d.refclassid = 'pg_catalog.pg_extension'::regclass AND d.refobjid = ext
       AND d.deptype = 'e'
       AND NOT (d.classid = 'pg_catalog.pg_proc'::regclass
                OR (d.classid = 'pg_catalog.pg_class'::regclass AND c.relkind IN ('r', 'v', 'S'))
                OR (d.classid = 'pg_catalog.pg_type'::regclass AND EXISTS (
                        SELECT 1
                          FROM pg_catalog.pg_type t
                          LEFT JOIN pg_catalog.pg_type e ON e.oid = t.typelem
                          JOIN pg_catalog.pg_class tc
                            ON tc.oid = coalesce(nullif(t.typrelid, 0::oid), e.typrelid)
                         WHERE t.oid = d.objid AND tc.relkind IN ('r', 'v', 'S'))));
    IF left_open IS NOT NULL THEN
        RAISE EXCEPTION 'sandbox_persist._harden() does not know how to secure %', left_open
            USING ERRCODE = 'feature_not_supported',
                  DETAIL = 'It secures functions, tables, views and sequences only.',
                  HINT = 'Extend sandbox_persist._harden() in the upgrade script that adds such an object.';
    END IF;

    -- The owner role: created when missing, refused when it has more rights.
    SELECT * INTO r FROM pg_catalog.pg_roles WHERE rolname = 'sandbox_persist_owner';
    IF NOT FOUND THEN
        CREATE ROLE sandbox_persist_owner NOLOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE
            NOREPLICATION NOBYPASSRLS NOINHERIT;
        COMMENT ON ROLE sandbox_persist_owner IS
            'Owner of the sandbox_persist extension''s objects: its SECURITY DEFINER functions run as this role. Not a login role; never grant it to anyone.';
    ELSE
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
    END IF;

    -- The schema: nothing for PUBLIC; the role reaches its tables through it,
    -- and the grant option lets grant_app_role (which runs as the role) pass
    -- USAGE on to an application role.
    IF EXISTS (SELECT 1 FROM pg_catalog.pg_namespace n, pg_catalog.aclexplode(n.nspacl) a
                WHERE n.nspname = 'sandbox_persist' AND a.grantee = 0) THEN
        REVOKE ALL ON SCHEMA sandbox_persist FROM PUBLIC;
    END IF;
    IF NOT pg_catalog.has_schema_privilege('sandbox_persist_owner', 'sandbox_persist',
                                           'USAGE WITH GRANT OPTION') THEN
        GRANT USAGE ON SCHEMA sandbox_persist TO sandbox_persist_owner WITH GRANT OPTION;
    END IF;

    -- Every object to the role: tables (their indexes and identity sequences
    -- follow), the explicit sequences, the views, the functions. Privileges
    -- granted to application roles move with them.
    FOR obj IN
        SELECT c.oid::regclass AS rel, c.relkind
          FROM pg_catalog.pg_depend d
          JOIN pg_catalog.pg_class c ON c.oid = d.objid
         WHERE d.classid = 'pg_catalog.pg_class'::regclass
           AND d.refclassid = 'pg_catalog.pg_extension'::regclass AND d.refobjid = ext
           AND d.deptype = 'e'
           AND c.relowner <> 'sandbox_persist_owner'::regrole
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
           AND d.refclassid = 'pg_catalog.pg_extension'::regclass AND d.refobjid = ext
           AND d.deptype = 'e'
           AND p.proowner <> 'sandbox_persist_owner'::regrole
         ORDER BY p.proname
    LOOP
        EXECUTE format('ALTER FUNCTION %s OWNER TO sandbox_persist_owner', obj.fn);
    END LOOP;

    -- A SECURITY DEFINER function resolves names in pg_catalog, then pg_temp,
    -- never in a schema a caller can write to. Other settings stay.
    FOR obj IN
        SELECT p.oid::regprocedure AS fn
          FROM pg_catalog.pg_depend d
          JOIN pg_catalog.pg_proc p ON p.oid = d.objid
         WHERE d.classid = 'pg_catalog.pg_proc'::regclass
           AND d.refclassid = 'pg_catalog.pg_extension'::regclass AND d.refobjid = ext
           AND d.deptype = 'e' AND p.prosecdef
           AND NOT coalesce(p.proconfig @> ARRAY[pinned], false)
         ORDER BY p.proname
    LOOP
        EXECUTE format('ALTER FUNCTION %s SET search_path = pg_catalog, pg_temp', obj.fn);
    END LOOP;

    -- Nothing for PUBLIC. An object whose ACL is still the default (NULL)
    -- gets an explicit one as well: a function's default lets PUBLIC execute.
    FOR obj IN
        SELECT format('%s %s', CASE WHEN d.classid = 'pg_catalog.pg_proc'::regclass THEN 'FUNCTION'
                                    WHEN c.relkind = 'S' THEN 'SEQUENCE' ELSE 'TABLE' END,
                      CASE WHEN d.classid = 'pg_catalog.pg_proc'::regclass
                           THEN d.objid::regprocedure::text ELSE d.objid::regclass::text END) AS target
          FROM pg_catalog.pg_depend d
          LEFT JOIN pg_catalog.pg_class c ON d.classid = 'pg_catalog.pg_class'::regclass AND c.oid = d.objid
          LEFT JOIN pg_catalog.pg_proc p ON d.classid = 'pg_catalog.pg_proc'::regclass AND p.oid = d.objid
         WHERE d.classid IN ('pg_catalog.pg_class'::regclass, 'pg_catalog.pg_proc'::regclass)
           AND d.refclassid = 'pg_catalog.pg_extension'::regclass AND d.refobjid = ext
           AND d.deptype = 'e'
           AND (coalesce(c.relacl, p.proacl) IS NULL
                OR EXISTS (SELECT 1 FROM pg_catalog.aclexplode(coalesce(c.relacl, p.proacl)) a
                            WHERE a.grantee = 0))
         ORDER BY 1
    LOOP
        EXECUTE format('REVOKE ALL ON %s FROM PUBLIC CASCADE', obj.target);
    END LOOP;

    -- The initial privileges, as an installation sets them up (see above):
    -- the owner's own on every object, its USAGE on the schema too; rows
    -- missing for an object are added.
    FOR obj IN
        SELECT d.classid AS classoid, d.objid AS objoid,
               ARRAY(SELECT a FROM unnest(pg_catalog.acldefault(
                         CASE WHEN d.classid = 'pg_catalog.pg_proc'::regclass THEN 'f'
                              WHEN c.relkind = 'S' THEN 's' ELSE 'r' END::"char",
                         'sandbox_persist_owner'::regrole::oid)) AS a
                       WHERE a::text !~ '^=') AS initprivs   -- no PUBLIC entry
          FROM pg_catalog.pg_depend d
          LEFT JOIN pg_catalog.pg_class c ON d.classid = 'pg_catalog.pg_class'::regclass AND c.oid = d.objid
         WHERE d.classid IN ('pg_catalog.pg_class'::regclass, 'pg_catalog.pg_proc'::regclass)
           AND d.refclassid = 'pg_catalog.pg_extension'::regclass AND d.refobjid = ext
           AND d.deptype = 'e'
        UNION ALL
        SELECT 'pg_catalog.pg_namespace'::regclass, n.oid,
               pg_catalog.acldefault('n'::"char", n.nspowner)
               || pg_catalog.makeaclitem('sandbox_persist_owner'::regrole::oid, n.nspowner,
                                         'USAGE', true)
          FROM pg_catalog.pg_namespace n WHERE n.nspname = 'sandbox_persist'
    LOOP
        UPDATE pg_catalog.pg_init_privs ip
           SET initprivs = obj.initprivs, privtype = 'e'
         WHERE ip.classoid = obj.classoid AND ip.objoid = obj.objoid AND ip.objsubid = 0
           AND (ip.initprivs IS DISTINCT FROM obj.initprivs OR ip.privtype <> 'e');
        INSERT INTO pg_catalog.pg_init_privs (objoid, classoid, objsubid, privtype, initprivs)
        SELECT obj.objoid, obj.classoid, 0, 'e', obj.initprivs
         WHERE NOT EXISTS (SELECT 1 FROM pg_catalog.pg_init_privs ip
                            WHERE ip.classoid = obj.classoid AND ip.objoid = obj.objoid
                              AND ip.objsubid = 0);
    END LOOP;

    -- What the routine promises, checked: a failure here is a defect in it.
    SELECT string_agg(x, ', ') INTO left_open FROM (
        SELECT pg_catalog.pg_describe_object(d.classid, d.objid, 0) AS x
          FROM pg_catalog.pg_depend d
          LEFT JOIN pg_catalog.pg_class c ON d.classid = 'pg_catalog.pg_class'::regclass AND c.oid = d.objid
          LEFT JOIN pg_catalog.pg_proc p ON d.classid = 'pg_catalog.pg_proc'::regclass AND p.oid = d.objid
         WHERE d.classid IN ('pg_catalog.pg_class'::regclass, 'pg_catalog.pg_proc'::regclass)
           AND d.refclassid = 'pg_catalog.pg_extension'::regclass AND d.refobjid = ext
           AND d.deptype = 'e'
           AND (coalesce(c.relacl, p.proacl) IS NULL
                OR EXISTS (SELECT 1 FROM pg_catalog.aclexplode(coalesce(c.relacl, p.proacl)) a
                            WHERE a.grantee = 0)
                OR coalesce(c.relowner, p.proowner) <> 'sandbox_persist_owner'::regrole
                OR (p.prosecdef AND NOT coalesce(p.proconfig @> ARRAY[pinned], false)))
         ORDER BY 1) open_objects;
    IF left_open IS NOT NULL THEN
        RAISE EXCEPTION 'sandbox_persist._harden() left objects open: %', left_open
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  DETAIL = 'Each is usable by PUBLIC, owned by another role, or a SECURITY DEFINER function without a pinned search_path.';
    END IF;
END
$$;
COMMENT ON FUNCTION _harden() IS
    'Internal: the security set-up every install and upgrade script ends with (PUBLIC revoked, search_path pinned, objects owned by sandbox_persist_owner, initial privileges reset). Superuser only; never grant it.';

SELECT sandbox_persist._harden();
