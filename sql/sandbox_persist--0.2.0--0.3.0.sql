-- sandbox_persist 0.2.0 -> 0.3.0. CREATE EXTENSION runs 0.1.0, 0.1.0--0.2.0
-- and then this script; ALTER EXTENSION sandbox_persist UPDATE runs it on a
-- 0.2.0 database (and after 0.1.0--0.2.0 on a 0.1.0 one).
-- What it changes is listed, section by section, below and in CHANGELOG.md.
\echo Use "ALTER EXTENSION sandbox_persist UPDATE" to load this file. \quit

------------------------------------------------------------------------------
-- revoke_app_role: withdraw what grant_app_role gave. grant_app_role runs as
-- sandbox_persist_owner, so that role is the grantor of the application's
-- USAGE on the schema; the schema itself belongs to the superuser who
-- installed the extension, and DROP OWNED BY (run by a superuser) revokes only
-- grants made by an object's owner: the schema grant survived it and DROP ROLE
-- of the application role failed. The functions an application may execute
-- get one home, _app_functions(), read by both routines.
------------------------------------------------------------------------------
CREATE FUNCTION _app_functions() RETURNS SETOF regprocedure
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    SELECT p.oid::regprocedure
      FROM pg_catalog.pg_proc p
      JOIN pg_catalog.pg_depend d ON d.objid = p.oid AND d.classid = 'pg_catalog.pg_proc'::regclass
      JOIN pg_catalog.pg_extension e ON e.oid = d.refobjid AND d.deptype = 'e'
     WHERE e.extname = 'sandbox_persist'
       AND p.proname !~ '^_'
       AND p.proname NOT IN ('grant_app_role', 'revoke_app_role',
                             'schedule_maintenance', 'unschedule_maintenance')
$$;
COMMENT ON FUNCTION _app_functions() IS
    'Internal: the store functions an application role may execute (everything but the administration routines and the internal ones), as grant_app_role gives them.';

-- CREATE OR REPLACE resets what 0.1.0--0.2.0 set with ALTER FUNCTION, so the
-- definition repeats it: it runs as sandbox_persist_owner, the grantor.
CREATE OR REPLACE FUNCTION grant_app_role(app_role regrole) RETURNS void
LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    fn regprocedure;
BEGIN
    EXECUTE format('GRANT USAGE ON SCHEMA sandbox_persist TO %s', app_role);
    FOR fn IN SELECT f FROM sandbox_persist._app_functions() f LOOP
        EXECUTE format('GRANT EXECUTE ON FUNCTION %s TO %s', fn, app_role);
    END LOOP;
END
$$;

CREATE FUNCTION revoke_app_role(app_role regrole) RETURNS void
LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    fn regprocedure;
BEGIN
    IF app_role IS NULL OR NOT EXISTS (SELECT 1 FROM pg_catalog.pg_roles WHERE oid = app_role) THEN
        RAISE EXCEPTION 'role % does not exist', coalesce(app_role::oid::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = 'revoke_app_role withdraws the grants of an existing role.';
    END IF;
    IF app_role = 'sandbox_persist_owner'::regrole THEN
        RAISE EXCEPTION 'cannot revoke the privileges of sandbox_persist_owner'
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = 'The extension''s functions run as that role and own every object.';
    END IF;
    FOR fn IN
        SELECT p.oid::regprocedure
          FROM pg_catalog.pg_proc p
          JOIN pg_catalog.pg_depend d ON d.objid = p.oid AND d.classid = 'pg_catalog.pg_proc'::regclass
          JOIN pg_catalog.pg_extension e ON e.oid = d.refobjid AND d.deptype = 'e'
         WHERE e.extname = 'sandbox_persist'
    LOOP
        EXECUTE format('REVOKE EXECUTE ON FUNCTION %s FROM %s', fn, app_role);
    END LOOP;
    EXECUTE format('REVOKE USAGE ON SCHEMA sandbox_persist FROM %s', app_role);
    -- A grant made by another role (0.1.0's grant_app_role ran as the
    -- installing superuser) is that role's to withdraw.
    IF pg_catalog.has_schema_privilege(app_role, 'sandbox_persist', 'USAGE') THEN
        RAISE WARNING 'role % still has USAGE on schema sandbox_persist', app_role
            USING DETAIL = 'That grant was made by another role than sandbox_persist_owner (0.1.0 granted as the installing superuser), or comes through a role membership.',
                  HINT = 'As a superuser: REVOKE USAGE ON SCHEMA sandbox_persist FROM the role, or DROP OWNED BY it.';
    END IF;
END
$$;
COMMENT ON FUNCTION revoke_app_role(regrole) IS
    'Withdraws from an application role everything grant_app_role gave it (USAGE on the schema, EXECUTE on the store functions), so the role can be dropped. Superuser only.';

-- Sections are added above this line, one per change, each opened by a
-- comment block that says what it changes and why.

-- Every upgrade script ends with the hardening (see the 0.1.0--0.2.0 header).
SELECT sandbox_persist._harden();
