-- sandbox_persist: the current schema, the one place where every definition
-- of the extension lives (tables, sequences, views, functions, triggers, their
-- comments, the dump registrations and the hardening call).
--
-- The Makefile builds sql/sandbox_persist--<default_version>.sql from this file
-- (DATA_built; the built file is not committed), and CREATE EXTENSION runs that
-- built script. Existing databases reach the same catalog through the upgrade
-- scripts sql/sandbox_persist--A--B.sql, which stay as they were released; a
-- release changes both this file and its new upgrade script, and the upgrade
-- suite (test/upgrade) requires a database upgraded from every earlier release
-- to equal a fresh install from the built script. See docs/architecture.md,
-- "One source of the schema".
--
-- Objects are in dependency order: functions (SQL function bodies are checked
-- when called, not here), tables, sequences, views, constraints, indexes,
-- triggers; each object's COMMENT follows it. Owners, privileges and initial
-- privileges are not spelled here: _harden(), called last, sets them for every
-- member, as it does at the end of every upgrade script.
\echo Use "CREATE EXTENSION sandbox_persist" to load this file. \quit

DO $$
BEGIN
    IF current_setting('server_encoding') <> 'UTF8' THEN
        RAISE EXCEPTION 'sandbox_persist requires a UTF8 database'
            USING ERRCODE = 'feature_not_supported',
                  DETAIL = 'Identifier order is the byte order of UTF-8, which COLLATE "C" gives only in a UTF8 database.';
    END IF;
END
$$;

-- Local to this script (CREATE EXTENSION restores the setting afterwards).
SET check_function_bodies = false;

COMMENT ON SCHEMA sandbox_persist IS 'TanStack AI agent state (runs, messages, checkpoints, blobs, locks, event logs) kept by the sandbox_persist extension. Call the functions; the tables are private to them.';

-- function _app_functions()
CREATE FUNCTION sandbox_persist._app_functions() RETURNS SETOF regprocedure
    LANGUAGE sql STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
    SELECT p.oid::regprocedure
      FROM pg_catalog.pg_proc p
      JOIN pg_catalog.pg_depend d ON d.objid = p.oid AND d.classid = 'pg_catalog.pg_proc'::regclass
      JOIN pg_catalog.pg_extension e ON e.oid = d.refobjid AND d.deptype = 'e'
     WHERE e.extname = 'sandbox_persist'
       AND p.proname !~ '^_'
       AND p.proname NOT IN ('grant_app_role', 'revoke_app_role', 'grant_monitor_role',
                             'schedule_maintenance', 'unschedule_maintenance', 'metrics')
$$;

COMMENT ON FUNCTION sandbox_persist._app_functions() IS 'Internal: the store functions an application role may execute (everything but the administration routines and the internal ones), as grant_app_role gives them.';

-- function _blob_gc_enqueue()
CREATE FUNCTION sandbox_persist._blob_gc_enqueue() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
BEGIN
    -- Every content address that lost a reference, whether or not others
    -- remain: a concurrent removal of the other reference may not be visible
    -- here, and maintenance checks again before it deletes anything.
    INSERT INTO sandbox_persist.blob_gc_queue (blob_key, queued_at)
    SELECT DISTINCT gone.blob_key, (extract(epoch FROM clock_timestamp()) * 1000)::bigint
      FROM gone
     WHERE gone.blob_key ~ '^sandbox-(files|artifacts)/sha256/[0-9a-f]{64}$';
    RETURN NULL;
END
$$;

COMMENT ON FUNCTION sandbox_persist._blob_gc_enqueue() IS 'Internal, statement trigger of checkpoint_blob_refs and artifacts: queues each content-addressed blob key that lost a reference (blob_gc_queue), so maintenance looks at that blob again without walking the referenced ones.';

-- function _blobs_awaiting_gc(bigint, bigint)
CREATE FUNCTION sandbox_persist._blobs_awaiting_gc(cutoff bigint, max_count bigint) RETURNS bigint
    LANGUAGE sql STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
    -- Only the blobs maintenance may yet collect, the oldest max_count of
    -- each kind: those not settled (blobs_gc) and those that lost a
    -- reference since (blob_gc_queue). A blob something references is
    -- settled by the next round, so the count never walks them for long.
    SELECT count(*)
      FROM ((SELECT g.blob_key FROM sandbox_persist.blobs g
              WHERE g.relied_on_at < coalesce(cutoff, 9223372036854775807) AND NOT g.gc_settled
              ORDER BY g.relied_on_at LIMIT max_count)
            UNION
            (SELECT q.blob_key FROM sandbox_persist.blob_gc_queue q ORDER BY q.queued_at LIMIT max_count)) k,
           LATERAL (SELECT FROM sandbox_persist.blobs b
                     WHERE b.blob_key = k.blob_key
                       AND b.relied_on_at < coalesce(cutoff, 9223372036854775807)
                       AND b.blob_key ~ '^sandbox-(files|artifacts)/sha256/[0-9a-f]{64}$'
                       AND NOT EXISTS (SELECT 1 FROM sandbox_persist.checkpoint_blob_refs r WHERE r.blob_key = b.blob_key)
                       AND NOT EXISTS (SELECT 1 FROM sandbox_persist.artifacts a WHERE a.blob_key = b.blob_key)) c
$$;

COMMENT ON FUNCTION sandbox_persist._blobs_awaiting_gc(cutoff bigint, max_count bigint) IS 'Internal, for the overview view and _maintenance_backlog(): the content-addressed blobs nothing references that maintenance (A1) would collect with this grace cutoff (NULL: whatever their grace), counted among the oldest max_count candidates of each kind (a lower bound when more wait).';

-- function _checkpoint_export_fork(text)
CREATE FUNCTION sandbox_persist._checkpoint_export_fork(checkpoint_id text) RETURNS TABLE(checkpoint json, references_complete boolean, blob_keys text[], absent_blob_keys text[])
    LANGUAGE sql STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $_$
    WITH c AS (
        SELECT c.checkpoint_id, c.files, c.artifacts
          FROM sandbox_persist.checkpoints c WHERE c.checkpoint_id = $1
    ), k AS (
        SELECT DISTINCT e->>'blobKey' AS key
          FROM c, LATERAL (SELECT json_array_elements(c.files) AS e
                           UNION ALL SELECT json_array_elements(c.artifacts)) x
         WHERE e->>'blobKey' IS NOT NULL
    )
    SELECT sandbox_persist.checkpoint_get($1),
           (SELECT count(*) FROM k) = (SELECT count(*) FROM sandbox_persist.checkpoint_blob_refs r
                                        WHERE r.checkpoint_id = $1
                                          AND r.blob_key IN (SELECT key FROM k)),
           ARRAY(SELECT key FROM k ORDER BY key),
           ARRAY(SELECT key FROM k
                  WHERE NOT EXISTS (SELECT 1 FROM sandbox_persist.blobs b WHERE b.blob_key = k.key)
                  ORDER BY key)
      FROM c
$_$;

COMMENT ON FUNCTION sandbox_persist._checkpoint_export_fork(checkpoint_id text) IS 'Internal, called by the router on the source shard of a cross-shard fork: the checkpoint as checkpoint_get returns it, whether its reference rows are complete, its distinct blob keys and those this shard holds no bytes for.';

-- function _checkpoint_import_fork(json, json, bigint)
CREATE FUNCTION sandbox_persist._checkpoint_import_fork(input json, source json, now_ms bigint DEFAULT NULL::bigint) RETURNS json
    LANGUAGE c SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS 'MODULE_PATHNAME', '_checkpoint_import_fork';

COMMENT ON FUNCTION sandbox_persist._checkpoint_import_fork(input json, source json, now_ms bigint) IS 'Internal, called by the router on the destination shard of a cross-shard fork: the local fork''s checks and publish step with the source checkpoint given as data; SP015 when a referenced blob is not on this shard.';

-- function _harden()
CREATE FUNCTION sandbox_persist._harden() RETURNS void
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
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

    -- PostgreSQL 17 and later also name the roles of initial privileges in
    -- pg_shdepend (type 'i'). A GRANT inside an upgrade recorded the whole ACL
    -- of the moment as initial, an application role's grant included (0.1.0's
    -- grant_app_role gave it USAGE on the schema), and the rows rewritten
    -- above no longer name that role: its entry goes too, or DROP ROLE of it
    -- would fail for an object it has no privilege on.
    IF pg_catalog.current_setting('server_version_num')::int >= 170000 THEN
        DELETE FROM pg_catalog.pg_shdepend s
         WHERE s.dbid = (SELECT d.oid FROM pg_catalog.pg_database d
                          WHERE d.datname = pg_catalog.current_database())
           AND s.deptype = 'i'
           AND (s.classid, s.objid) IN (
                   SELECT d.classid, d.objid FROM pg_catalog.pg_depend d
                    WHERE d.refclassid = 'pg_catalog.pg_extension'::regclass
                      AND d.refobjid = ext AND d.deptype = 'e'
                   UNION ALL
                   SELECT 'pg_catalog.pg_namespace'::regclass, n.oid
                     FROM pg_catalog.pg_namespace n WHERE n.nspname = 'sandbox_persist')
           AND NOT EXISTS (SELECT 1 FROM pg_catalog.pg_init_privs ip,
                                         pg_catalog.aclexplode(ip.initprivs) a
                            WHERE ip.classoid = s.classid AND ip.objoid = s.objid
                              AND ip.objsubid = s.objsubid
                              AND s.refobjid IN (a.grantor, a.grantee));
    END IF;

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

COMMENT ON FUNCTION sandbox_persist._harden() IS 'Internal: the security set-up every install and upgrade script ends with (PUBLIC revoked, search_path pinned, objects owned by sandbox_persist_owner, initial privileges reset). Superuser only; never grant it.';

-- function _maintenance_backlog(bigint)
CREATE FUNCTION sandbox_persist._maintenance_backlog(now_ms bigint DEFAULT NULL::bigint) RETURNS json
    LANGUAGE c STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS 'MODULE_PATHNAME', '_maintenance_backlog';

COMMENT ON FUNCTION sandbox_persist._maintenance_backlog(now_ms bigint) IS 'Internal, for the overview view: how many rows each collecting action of maintain() (A1 blobs, A2 uploads, A3 locks, A5 event logs, A6 runs, A11 conversation blocks) would delete at now_ms under the current settings, without the max_rows bound, as json {blobs, uploads, locks, eventLogs, runs, conversationBlocks}. Reads only.';

-- function _maintenance_scheduled(bigint, text, text)
CREATE FUNCTION sandbox_persist._maintenance_scheduled(job_id bigint, schedule text, username text) RETURNS void
    LANGUAGE sql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
    INSERT INTO sandbox_persist.maintenance_schedule (id, job_id, schedule, username, scheduled_at)
    VALUES (1, job_id, schedule, username, (extract(epoch FROM clock_timestamp()) * 1000)::bigint)
    ON CONFLICT (id) DO UPDATE SET job_id = EXCLUDED.job_id, schedule = EXCLUDED.schedule,
        username = EXCLUDED.username, scheduled_at = EXCLUDED.scheduled_at
$$;

COMMENT ON FUNCTION sandbox_persist._maintenance_scheduled(job_id bigint, schedule text, username text) IS 'Internal, for schedule_maintenance: records the pg_cron job it created, so maintenance_health() knows maintenance is expected.';

-- function _maintenance_unscheduled()
CREATE FUNCTION sandbox_persist._maintenance_unscheduled() RETURNS void
    LANGUAGE sql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
    DELETE FROM sandbox_persist.maintenance_schedule
$$;

COMMENT ON FUNCTION sandbox_persist._maintenance_unscheduled() IS 'Internal, for unschedule_maintenance: forgets the recorded pg_cron job, so maintenance is no longer expected.';

-- function _reaper_ttl_ms()
CREATE FUNCTION sandbox_persist._reaper_ttl_ms() RETURNS bigint
    LANGUAGE c STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS 'MODULE_PATHNAME', '_reaper_ttl_ms';

COMMENT ON FUNCTION sandbox_persist._reaper_ttl_ms() IS 'Internal, for the overview view: the sandbox_persist.reaper_ttl setting in milliseconds (0 = unknown).';

-- function _reset_for_tests()
CREATE FUNCTION sandbox_persist._reset_for_tests() RETURNS void
    LANGUAGE c SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS 'MODULE_PATHNAME', '_reset_for_tests';

COMMENT ON FUNCTION sandbox_persist._reset_for_tests() IS 'Internal, tests only: empties every store. Refused (SP902) unless a superuser set sandbox_persist.allow_test_reset.';

-- function _row_count(text)
CREATE FUNCTION sandbox_persist._row_count(counter text) RETURNS bigint
    LANGUAGE sql STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
    SELECT coalesce(sum(c.value), 0)::bigint FROM sandbox_persist.row_counts c WHERE c.counter = $1
$$;

COMMENT ON FUNCTION sandbox_persist._row_count(counter text) IS 'Internal, for the overview view: the current value of one counter of row_counts (its folded row plus the deltas of backends not folded yet).';

-- function _row_count_trigger()
CREATE FUNCTION sandbox_persist._row_count_trigger() RETURNS trigger
    LANGUAGE c SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS 'MODULE_PATHNAME', '_row_count_trigger';

COMMENT ON FUNCTION sandbox_persist._row_count_trigger() IS 'Internal, row trigger: adds the change of the counters its arguments name (NAME counts rows, NAME+COLUMN sums a column, NAME#COLUMN sums its stored size, and {COLUMN} in NAME stands for the column''s value) to the calling backend''s row of row_counts.';

-- function _thread_drop(text)
CREATE FUNCTION sandbox_persist._thread_drop(thread_id text) RETURNS json
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
    t constant text := thread_id;
    m sandbox_persist.thread_moves%ROWTYPE;
BEGIN
    SELECT * INTO m FROM sandbox_persist.thread_moves x WHERE x.thread_id = t FOR UPDATE;
    IF FOUND AND m.state = 'moved' THEN
        RETURN json_build_object('dropped', false);
    ELSIF NOT FOUND OR m.state <> 'moving' THEN
        PERFORM sandbox_persist._thread_move_refuse(t, 'it is not marked as moving on this shard');
    END IF;
    -- the guard lets this transaction's own deletes through ('dropping' is never committed)
    UPDATE sandbox_persist.thread_moves x SET state = 'dropping' WHERE x.thread_id = t;
    DELETE FROM sandbox_persist.checkpoints x WHERE x.thread_id = t;   -- references cascade
    DELETE FROM sandbox_persist.conversation_blocks x WHERE x.thread_id = t;
    DELETE FROM sandbox_persist.conversation_garbage x WHERE x.thread_id = t;
    DELETE FROM sandbox_persist.messages x WHERE x.thread_id = t;
    DELETE FROM sandbox_persist.interrupts x WHERE x.thread_id = t;
    DELETE FROM sandbox_persist.artifacts x WHERE x.thread_id = t;
    DELETE FROM sandbox_persist.generation_runs x WHERE x.thread_id = t;
    DELETE FROM sandbox_persist.event_log_entries e USING sandbox_persist.event_logs l, sandbox_persist.runs r
     WHERE e.log_id = l.log_id AND l.run_id = r.run_id AND r.thread_id = t;
    DELETE FROM sandbox_persist.event_log_producers p USING sandbox_persist.event_logs l, sandbox_persist.runs r
     WHERE p.log_id = l.log_id AND l.run_id = r.run_id AND r.thread_id = t;
    DELETE FROM sandbox_persist.event_logs l USING sandbox_persist.runs r
     WHERE l.run_id = r.run_id AND r.thread_id = t;
    DELETE FROM sandbox_persist.runs x WHERE x.thread_id = t;
    DELETE FROM sandbox_persist.checkpoint_threads x WHERE x.thread_id = t;
    UPDATE sandbox_persist.thread_moves x
       SET state = 'moved', since = (extract(epoch FROM pg_catalog.clock_timestamp()) * 1000)::bigint
     WHERE x.thread_id = t;
    RETURN json_build_object('dropped', true);
END
$$;

COMMENT ON FUNCTION sandbox_persist._thread_drop(thread_id text) IS 'Internal, move step 6 on the source shard: deletes the moved thread''s rows and leaves a ''moved'' tombstone. Idempotent.';

-- function _thread_export(text)
CREATE FUNCTION sandbox_persist._thread_export(thread_id text) RETURNS json
    LANGUAGE plpgsql STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $_$
DECLARE
    t constant text := thread_id;
    doc json;
BEGIN
    IF NOT EXISTS (SELECT 1 FROM sandbox_persist.thread_moves m
                    WHERE m.thread_id = t AND m.state = 'moving') THEN
        PERFORM sandbox_persist._thread_move_refuse(t, 'it is not marked as moving on this shard');
    END IF;
    WITH keys AS (
        SELECT DISTINCT key FROM (
            SELECT r.blob_key AS key FROM sandbox_persist.checkpoint_blob_refs r
              JOIN sandbox_persist.checkpoints c USING (checkpoint_id) WHERE c.thread_id = t
            UNION ALL
            SELECT a.blob_key FROM sandbox_persist.artifacts a
             WHERE a.thread_id = t AND a.blob_key ~ '^sandbox-(files|artifacts)/sha256/[0-9a-f]{64}$') k
    )
    SELECT json_build_object(
        'threadId', t,
        'thread', (SELECT json_build_object('fence', x.fence, 'ownerToken', x.owner_token,
                                            'leaseExpiresAt', x.lease_expires_at, 'headId', x.head_id,
                                            'convLogEnd', x.conv_log_end)
                     FROM sandbox_persist.checkpoint_threads x WHERE x.thread_id = t),
        'transcript', (SELECT json_build_object('transcript', x.transcript::text, 'updatedAt', x.updated_at)
                         FROM sandbox_persist.messages x WHERE x.thread_id = t),
        -- the conversation blocks move whole, so positions and ranges stay valid
        'conversationBlocks', (SELECT coalesce(json_agg(json_build_array(x.first_pos, x.message_count, x.bodies)
                 ORDER BY x.first_pos), '[]')
               FROM sandbox_persist.conversation_blocks x WHERE x.thread_id = t),
        'conversationGarbage', (SELECT coalesce(json_agg(x.block::text ORDER BY x.block), '[]')
               FROM sandbox_persist.conversation_garbage x WHERE x.thread_id = t),
        'checkpoints', (SELECT coalesce(json_agg(json_build_object(
                 'checkpointId', x.checkpoint_id, 'parentId', x.parent_id, 'createdAt', x.created_at,
                 'reason', x.reason, 'label', x.label, 'sourceRunId', x.source_run_id,
                 'files', x.files::text, 'artifacts', x.artifacts::text,
                 'convRanges', x.conv_ranges::text, 'convBlock', x.conv_block::text,
                 'convLen', x.conv_len, 'convDigest', encode(x.conv_digest, 'hex'))
                 ORDER BY x.created_at, x.checkpoint_id), '[]')
               FROM sandbox_persist.checkpoints x WHERE x.thread_id = t),
        'references', (SELECT coalesce(json_agg(json_build_object(
                 'checkpointId', r.checkpoint_id, 'blobKey', r.blob_key)
                 ORDER BY r.checkpoint_id, r.blob_key), '[]')
               FROM sandbox_persist.checkpoint_blob_refs r
               JOIN sandbox_persist.checkpoints c USING (checkpoint_id) WHERE c.thread_id = t),
        'runs', (SELECT coalesce(json_agg(json_build_object(
                 'runId', x.run_id, 'status', x.status, 'startedAt', x.started_at,
                 'finishedAt', x.finished_at, 'error', x.error::text, 'usage', x.usage::text,
                 'sandboxKey', x.sandbox_key, 'detachedSince', x.detached_since,
                 'cancelRequested', x.cancel_requested, 'driverEpoch', x.driver_epoch,
                 'changedAt', x.changed_at, 'statusChangedAt', x.status_changed_at)
                 ORDER BY x.seq), '[]')
               FROM sandbox_persist.runs x WHERE x.thread_id = t),
        'interrupts', (SELECT coalesce(json_agg(json_build_object(
                 'interruptId', x.interrupt_id, 'runId', x.run_id, 'status', x.status,
                 'requestedAt', x.requested_at, 'resolvedAt', x.resolved_at,
                 'payload', x.payload::text, 'response', x.response::text) ORDER BY x.seq), '[]')
               FROM sandbox_persist.interrupts x WHERE x.thread_id = t),
        'generationRuns', (SELECT coalesce(json_agg(json_build_object(
                 'runId', x.run_id, 'activity', x.activity, 'provider', x.provider,
                 'model', x.model, 'status', x.status, 'startedAt', x.started_at,
                 'finishedAt', x.finished_at, 'error', x.error::text, 'result', x.result::text,
                 'artifacts', x.artifacts::text, 'usage', x.usage::text) ORDER BY x.seq), '[]')
               FROM sandbox_persist.generation_runs x WHERE x.thread_id = t),
        'artifacts', (SELECT coalesce(json_agg(json_build_object(
                 'artifactId', x.artifact_id, 'runId', x.run_id, 'blobKey', x.blob_key,
                 'name', x.name, 'mimeType', x.mime_type, 'size', x.size,
                 'sourceUrl', x.source_url, 'createdAt', x.created_at)
                 ORDER BY x.created_at, x.artifact_id), '[]')
               FROM sandbox_persist.artifacts x WHERE x.thread_id = t),
        'eventLogs', (SELECT coalesce(json_agg(json_build_object(
                 'runId', l.run_id, 'tailSeq', l.tail_seq, 'createdAt', l.created_at,
                 'lastAppendAt', l.last_append_at, 'closedAt', l.closed_at,
                 'appendsAfterClose', l.appends_after_close,
                 'entries', (SELECT coalesce(json_agg(json_build_array(e.seq, e.chunk::text)
                                                      ORDER BY e.seq), '[]')
                               FROM sandbox_persist.event_log_entries e WHERE e.log_id = l.log_id),
                 'producers', (SELECT coalesce(json_agg(json_build_array(p.producer_id, p.producer_seq,
                                                                         p.first_seq, p.chunk_count)
                                                        ORDER BY p.producer_id, p.producer_seq), '[]')
                                 FROM sandbox_persist.event_log_producers p WHERE p.log_id = l.log_id))
                 ORDER BY l.log_id), '[]')
               FROM sandbox_persist.event_logs l
               JOIN sandbox_persist.runs r ON r.run_id = l.run_id WHERE r.thread_id = t),
        'blobKeys', (SELECT coalesce(json_agg(key ORDER BY key), '[]') FROM keys),
        'absentBlobKeys', (SELECT coalesce(json_agg(key ORDER BY key), '[]') FROM keys
                            WHERE NOT EXISTS (SELECT 1 FROM sandbox_persist.blobs b
                                               WHERE b.blob_key = keys.key)))
      INTO doc;
    RETURN doc;
END
$_$;

COMMENT ON FUNCTION sandbox_persist._thread_export(thread_id text) IS 'Internal, move step 2 on the source shard: everything the moving thread owns (lease and head, transcript, conversation blocks, checkpoints and references, runs, interrupts, generation runs, artifacts, event logs) and its blob keys, as one JSON document.';

-- function _thread_import(text, integer, json)
CREATE FUNCTION sandbox_persist._thread_import(thread_id text, from_shard integer, doc json) RETURNS json
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
    t constant text := thread_id;
    m sandbox_persist.thread_moves%ROWTYPE;
    clash text;
    missing text;
BEGIN
    IF doc IS NULL OR doc->>'threadId' IS DISTINCT FROM t OR from_shard IS NULL THEN
        RAISE EXCEPTION 'invalid thread import'
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = format('The document must be _thread_export(%L) of the source shard.', t);
    END IF;
    IF octet_length(t) > 1024 THEN   -- the identifier limit of every store
        RAISE EXCEPTION 'thread_id is too long'
            USING ERRCODE = 'string_data_right_truncation',
                  DETAIL = format('It has %s UTF-8 bytes; the limit is 1024.', octet_length(t));
    END IF;
    -- The move lock (class 5314, per thread, exclusively) serialises
    -- two imports of one thread and lets _thread_move_imported wait for an
    -- import still in flight before it answers.
    PERFORM pg_catalog.pg_advisory_xact_lock(5314, pg_catalog.hashtext(t));
    SELECT * INTO m FROM sandbox_persist.thread_moves x WHERE x.thread_id = t FOR UPDATE;
    IF FOUND AND m.state = 'imported' THEN
        RETURN json_build_object('imported', false, 'alreadyImported', true);
    ELSIF FOUND AND m.state <> 'moved' THEN
        PERFORM sandbox_persist._thread_move_refuse(t, 'it is moving out of this shard');
    END IF;
    SELECT string_agg(DISTINCT source, ', ') INTO clash
      FROM sandbox_persist.thread_owned_state s WHERE s.thread_id = t;
    IF clash IS NULL THEN
        SELECT string_agg(what, ', ') INTO clash FROM (
            SELECT 'checkpoint ' || c.checkpoint_id AS what FROM sandbox_persist.checkpoints c
             WHERE c.checkpoint_id IN (SELECT x->>'checkpointId' FROM json_array_elements(doc->'checkpoints') x)
            UNION ALL SELECT 'run ' || r.run_id FROM sandbox_persist.runs r
             WHERE r.run_id IN (SELECT x->>'runId' FROM json_array_elements(doc->'runs') x)
            UNION ALL SELECT 'interrupt ' || i.interrupt_id FROM sandbox_persist.interrupts i
             WHERE i.interrupt_id IN (SELECT x->>'interruptId' FROM json_array_elements(doc->'interrupts') x)
            UNION ALL SELECT 'generation run ' || g.run_id FROM sandbox_persist.generation_runs g
             WHERE g.run_id IN (SELECT x->>'runId' FROM json_array_elements(doc->'generationRuns') x)
            UNION ALL SELECT 'artifact ' || a.artifact_id FROM sandbox_persist.artifacts a
             WHERE a.artifact_id IN (SELECT x->>'artifactId' FROM json_array_elements(doc->'artifacts') x)
            UNION ALL SELECT 'event log ' || l.run_id FROM sandbox_persist.event_logs l
             WHERE l.run_id IN (SELECT x->>'runId' FROM json_array_elements(doc->'eventLogs') x)) c;
        IF clash IS NOT NULL THEN
            clash := 'ids already used here: ' || clash;
        END IF;
    ELSE
        clash := 'state already here: ' || clash;
    END IF;
    IF clash IS NOT NULL THEN
        PERFORM sandbox_persist._thread_move_refuse(t, clash);
    END IF;
    -- every blob the source holds must be here, held until commit (as append)
    PERFORM 1 FROM sandbox_persist.blobs b
     WHERE b.blob_key IN (SELECT json_array_elements_text(doc->'blobKeys'))
     ORDER BY b.blob_key FOR KEY SHARE;
    SELECT string_agg(k, ', ' ORDER BY k) INTO missing
      FROM json_array_elements_text(doc->'blobKeys') k
     WHERE k NOT IN (SELECT json_array_elements_text(doc->'absentBlobKeys'))
       AND NOT EXISTS (SELECT 1 FROM sandbox_persist.blobs b WHERE b.blob_key = k);
    IF missing IS NOT NULL THEN
        RAISE EXCEPTION 'thread import blob missing on the destination shard'
            USING ERRCODE = 'SP015',
                  DETAIL = format('Thread "%s" references blobs this shard does not hold: %s.', t, missing),
                  HINT = 'Copy the missing blobs to this shard first, then import the thread again.';
    END IF;

    -- a tombstone of an earlier move out of this shard gives way
    DELETE FROM sandbox_persist.thread_moves x WHERE x.thread_id = t;
    IF doc->'thread' IS NOT NULL AND json_typeof(doc->'thread') = 'object' THEN
        INSERT INTO sandbox_persist.checkpoint_threads AS x
               (thread_id, fence, owner_token, lease_expires_at, head_id, conv_log_end)
        SELECT t, (doc->'thread'->>'fence')::bigint, (doc->'thread'->>'ownerToken')::uuid,
               (doc->'thread'->>'leaseExpiresAt')::bigint, doc->'thread'->>'headId',
               coalesce((doc->'thread'->>'convLogEnd')::bigint, 0)
        ON CONFLICT ON CONSTRAINT checkpoint_threads_pkey DO UPDATE
           SET fence = greatest(x.fence, excluded.fence), owner_token = excluded.owner_token,
               lease_expires_at = excluded.lease_expires_at, head_id = excluded.head_id,
               conv_log_end = excluded.conv_log_end;
    END IF;
    IF doc->'transcript' IS NOT NULL AND json_typeof(doc->'transcript') = 'object' THEN
        INSERT INTO sandbox_persist.messages (thread_id, transcript, updated_at)
        VALUES (t, (doc->'transcript'->>'transcript')::json, (doc->'transcript'->>'updatedAt')::bigint);
    END IF;
    -- blocks keep their positions, so the checkpoints' ranges are copied as they are
    INSERT INTO sandbox_persist.conversation_blocks (thread_id, first_pos, message_count, bodies)
    SELECT t, (b.v->>0)::bigint, (b.v->>1)::integer, b.v->>2
      FROM json_array_elements(doc->'conversationBlocks') AS b(v);
    -- a document from a 0.4.0 shard names each position's message: one block
    -- per checkpoint's (or queued) block of positions, as the 0.5.0 update does
    WITH old_messages AS (SELECT x."messageId" AS message_id, x.body
                 FROM json_to_recordset(doc->'conversationMessages') AS x("messageId" bigint, body text)),
         old_log AS (SELECT (e.v->>0)::bigint AS pos, (e.v->>1)::bigint AS message_id
                 FROM json_array_elements(doc->'conversationLog') AS e(v)),
         old_blocks AS (SELECT (c.v->>'convBlock')::int8range AS block
                          FROM json_array_elements(doc->'checkpoints') AS c(v)
                        UNION SELECT g::int8range FROM json_array_elements_text(doc->'conversationGarbage') AS g)
    INSERT INTO sandbox_persist.conversation_blocks (thread_id, first_pos, message_count, bodies)
    SELECT t, lower(k.block), count(*), string_agg(om.body, ',' ORDER BY ol.pos)
      FROM old_blocks k JOIN old_log ol ON ol.pos <@ k.block
      JOIN old_messages om ON om.message_id = ol.message_id
     WHERE doc->'conversationBlocks' IS NULL AND NOT isempty(k.block)
     GROUP BY k.block;
    INSERT INTO sandbox_persist.conversation_garbage (thread_id, block)
    SELECT t, g::int8range FROM json_array_elements_text(doc->'conversationGarbage') AS g;
    INSERT INTO sandbox_persist.checkpoints (checkpoint_id, thread_id, parent_id, created_at, reason,
                                             label, source_run_id, files, artifacts,
                                             conv_ranges, conv_block, conv_len, conv_digest)
    SELECT x."checkpointId", t, x."parentId", x."createdAt", x.reason, x.label, x."sourceRunId",
           x.files::json, x.artifacts::json, x."convRanges"::int8multirange,
           x."convBlock"::int8range, x."convLen", decode(x."convDigest", 'hex')
      FROM json_array_elements(doc->'checkpoints') WITH ORDINALITY AS e(v, ord),
           LATERAL json_to_record(e.v) AS x("checkpointId" text,
           "parentId" text, "createdAt" float8, reason text, label text, "sourceRunId" text,
           files text, artifacts text, "convRanges" text, "convBlock" text, "convLen" integer,
           "convDigest" text)
     ORDER BY e.ord;
    INSERT INTO sandbox_persist.checkpoint_blob_refs (checkpoint_id, blob_key)
    SELECT x."checkpointId", x."blobKey"
      FROM json_to_recordset(doc->'references') AS x("checkpointId" text, "blobKey" text);
    INSERT INTO sandbox_persist.runs (run_id, thread_id, status, started_at, finished_at, error,
                                      usage, sandbox_key, detached_since, cancel_requested,
                                      driver_epoch, changed_at, status_changed_at)
    SELECT x."runId", t, x.status, x."startedAt", x."finishedAt", x.error::json, x.usage::json,
           x."sandboxKey", x."detachedSince", x."cancelRequested", x."driverEpoch", x."changedAt",
           coalesce(x."statusChangedAt", x."changedAt")
      FROM json_array_elements(doc->'runs') WITH ORDINALITY AS e(v, ord),
           LATERAL json_to_record(e.v) AS x("runId" text, status text,
           "startedAt" bigint, "finishedAt" bigint, error text, usage text, "sandboxKey" text,
           "detachedSince" bigint, "cancelRequested" boolean, "driverEpoch" bigint,
           "changedAt" bigint, "statusChangedAt" bigint)
     ORDER BY e.ord;
    INSERT INTO sandbox_persist.interrupts (interrupt_id, run_id, thread_id, status, requested_at,
                                            resolved_at, payload, response)
    SELECT x."interruptId", x."runId", t, x.status, x."requestedAt", x."resolvedAt",
           x.payload::json, x.response::json
      FROM json_array_elements(doc->'interrupts') WITH ORDINALITY AS e(v, ord),
           LATERAL json_to_record(e.v) AS x("interruptId" text,
           "runId" text, status text, "requestedAt" bigint, "resolvedAt" bigint, payload text,
           response text)
     ORDER BY e.ord;
    INSERT INTO sandbox_persist.generation_runs (run_id, thread_id, activity, provider, model,
                                                 status, started_at, finished_at, error, result,
                                                 artifacts, usage)
    SELECT x."runId", t, x.activity, x.provider, x.model, x.status, x."startedAt", x."finishedAt",
           x.error::json, x.result::json, x.artifacts::json, x.usage::json
      FROM json_array_elements(doc->'generationRuns') WITH ORDINALITY AS e(v, ord),
           LATERAL json_to_record(e.v) AS x("runId" text,
           activity text, provider text, model text, status text, "startedAt" bigint,
           "finishedAt" bigint, error text, result text, artifacts text, usage text)
     ORDER BY e.ord;
    INSERT INTO sandbox_persist.artifacts (artifact_id, run_id, thread_id, blob_key, name,
                                           mime_type, size, source_url, created_at)
    SELECT x."artifactId", x."runId", t, x."blobKey", x.name, x."mimeType", x.size, x."sourceUrl",
           x."createdAt"
      FROM json_to_recordset(doc->'artifacts') AS x("artifactId" text, "runId" text,
           "blobKey" text, name text, "mimeType" text, size bigint, "sourceUrl" text,
           "createdAt" float8);
    -- event logs get new log ids here; entries and producers follow by run id
    INSERT INTO sandbox_persist.event_logs (run_id, tail_seq, created_at, last_append_at, closed_at,
                                            appends_after_close)
    SELECT x."runId", x."tailSeq", x."createdAt", x."lastAppendAt", x."closedAt", x."appendsAfterClose"
      FROM json_array_elements(doc->'eventLogs') WITH ORDINALITY AS e(v, ord),
           LATERAL json_to_record(e.v) AS x("runId" text, "tailSeq" bigint, "createdAt" bigint,
                                            "lastAppendAt" bigint, "closedAt" bigint,
                                            "appendsAfterClose" bigint)
     ORDER BY e.ord;
    -- the running digests follow from (seq, chunk) alone: the same as on the source
    INSERT INTO sandbox_persist.event_log_entries (log_id, seq, chunk, digest)
    SELECT h.log_id, h.seq, h.chunk::json,
           pg_catalog.bit_xor(h.h) OVER (PARTITION BY h.log_id ORDER BY h.seq)
      FROM (SELECT l.log_id, (en->>0)::bigint AS seq, en->>1 AS chunk,
                   ('x' || pg_catalog.encode(pg_catalog.substr(pg_catalog.sha256(
                       pg_catalog.int8send((en->>0)::bigint) || pg_catalog.convert_to(en->>1, 'UTF8')),
                       1, 8), 'hex'))::pg_catalog.bit(64)::bigint AS h
              FROM json_array_elements(doc->'eventLogs') AS e(v)
              JOIN sandbox_persist.event_logs l ON l.run_id = e.v->>'runId',
                   LATERAL json_array_elements(e.v->'entries') AS en) h;
    UPDATE sandbox_persist.event_logs l SET tail_digest = x.digest
      FROM sandbox_persist.event_log_entries x
     WHERE x.log_id = l.log_id AND x.seq = l.tail_seq
       AND l.run_id IN (SELECT e.v->>'runId' FROM json_array_elements(doc->'eventLogs') AS e(v));
    INSERT INTO sandbox_persist.event_log_producers (log_id, producer_id, producer_seq, first_seq,
                                                     chunk_count)
    SELECT l.log_id, (p->>0)::uuid, (p->>1)::bigint, (p->>2)::bigint, (p->>3)::integer
      FROM json_array_elements(doc->'eventLogs') AS e(v)
      JOIN sandbox_persist.event_logs l ON l.run_id = e.v->>'runId',
           LATERAL json_array_elements(e.v->'producers') AS p;
    INSERT INTO sandbox_persist.thread_moves VALUES
        (t, 'imported', from_shard, (extract(epoch FROM pg_catalog.clock_timestamp()) * 1000)::bigint);
    RETURN json_build_object('imported', true, 'alreadyImported', false);
END
$$;

COMMENT ON FUNCTION sandbox_persist._thread_import(thread_id text, from_shard integer, doc json) IS 'Internal, move step 4 on the destination shard: inserts an exported thread in one transaction or nothing; refused when this shard already holds state or ids of the thread, SP015 when a blob is missing. Idempotent.';

-- function _thread_move_abort(text)
CREATE FUNCTION sandbox_persist._thread_move_abort(thread_id text) RETURNS boolean
    LANGUAGE sql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $_$
    WITH d AS (DELETE FROM sandbox_persist.thread_moves x
                WHERE x.thread_id = $1 AND x.state = 'moving' RETURNING 1)
    SELECT EXISTS (SELECT 1 FROM d)
$_$;

COMMENT ON FUNCTION sandbox_persist._thread_move_abort(thread_id text) IS 'Internal: ends a move that has not been imported, on the source shard: the thread takes writes again.';

-- function _thread_move_begin(text, integer)
CREATE FUNCTION sandbox_persist._thread_move_begin(thread_id text, to_shard integer) RETURNS json
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
    m sandbox_persist.thread_moves%ROWTYPE;
BEGIN
    IF thread_id IS NULL OR thread_id = '' OR to_shard IS NULL OR to_shard < 0 THEN
        RAISE EXCEPTION 'invalid thread move'
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = 'A move needs a non-empty thread id and a shard number >= 0.';
    END IF;
    IF octet_length(thread_id) > 1024 THEN   -- the identifier limit of every store
        RAISE EXCEPTION 'thread_id is too long'
            USING ERRCODE = 'string_data_right_truncation',
                  DETAIL = format('It has %s UTF-8 bytes; the limit is 1024.', octet_length(thread_id));
    END IF;
    PERFORM pg_catalog.pg_advisory_xact_lock(5314, pg_catalog.hashtext(thread_id));
    -- the write guard's bucket (src/thread_moves.c), exclusively
    PERFORM pg_catalog.pg_advisory_xact_lock(5316, pg_catalog.hashtext(thread_id) & 255);
    SELECT * INTO m FROM sandbox_persist.thread_moves t WHERE t.thread_id = _thread_move_begin.thread_id;
    IF NOT FOUND THEN
        INSERT INTO sandbox_persist.thread_moves VALUES
            (thread_id, 'moving', to_shard,
             (extract(epoch FROM pg_catalog.clock_timestamp()) * 1000)::bigint);
        RETURN json_build_object('state', 'moving');
    ELSIF m.state IN ('moving', 'moved') AND m.peer_shard = to_shard THEN
        RETURN json_build_object('state', m.state);
    ELSIF m.state = 'imported' THEN
        PERFORM sandbox_persist._thread_move_refuse(thread_id,
            'its move into this shard has not been finished yet');
    END IF;
    PERFORM sandbox_persist._thread_move_refuse(thread_id,
        format('it is already %s shard %s', CASE m.state WHEN 'moving' THEN 'moving to' ELSE 'on' END,
               m.peer_shard));
    RETURN NULL;
END
$$;

COMMENT ON FUNCTION sandbox_persist._thread_move_begin(thread_id text, to_shard integer) IS 'Internal, move step 1 on the source shard: waits for writes in flight, then marks the thread as moving so every later write to it is refused (SP014). Idempotent.';

-- function _thread_move_finish(text)
CREATE FUNCTION sandbox_persist._thread_move_finish(thread_id text) RETURNS boolean
    LANGUAGE sql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $_$
    WITH d AS (DELETE FROM sandbox_persist.thread_moves x
                WHERE x.thread_id = $1 AND x.state = 'imported' RETURNING 1)
    SELECT EXISTS (SELECT 1 FROM d)
$_$;

COMMENT ON FUNCTION sandbox_persist._thread_move_finish(thread_id text) IS 'Internal, move step 7 on the destination shard: forgets the ''imported'' mark once the move is complete. Idempotent.';

-- function _thread_move_imported(text)
CREATE FUNCTION sandbox_persist._thread_move_imported(thread_id text) RETURNS boolean
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
BEGIN
    PERFORM pg_catalog.pg_advisory_xact_lock(5314, pg_catalog.hashtext(thread_id));
    RETURN EXISTS (SELECT 1 FROM sandbox_persist.thread_moves x
                    WHERE x.thread_id = _thread_move_imported.thread_id AND x.state = 'imported');
END
$$;

COMMENT ON FUNCTION sandbox_persist._thread_move_imported(thread_id text) IS 'Internal: whether an import of the thread has committed on this shard (waits for one still in flight), so a resumed move knows where it stopped.';

-- function _thread_move_refuse(text, text)
CREATE FUNCTION sandbox_persist._thread_move_refuse(thread_id text, what text) RETURNS void
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
BEGIN
    RAISE EXCEPTION 'thread move step refused: %', what
        USING ERRCODE = 'object_not_in_prerequisite_state',
              DETAIL = format('Thread "%s": %s.', thread_id, what);
END
$$;

COMMENT ON FUNCTION sandbox_persist._thread_move_refuse(thread_id text, what text) IS 'Internal: raises the error of a move step that cannot run (the thread''s move state, or its data here, does not allow it).';

-- function _thread_write_guard()
CREATE FUNCTION sandbox_persist._thread_write_guard() RETURNS trigger
    LANGUAGE c SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS 'MODULE_PATHNAME', '_thread_write_guard';

COMMENT ON FUNCTION sandbox_persist._thread_write_guard() IS 'Internal: the row trigger on every thread-owned table that refuses a write to a moving or moved thread with SP014 (SANDBOX_THREAD_MOVING).';

-- function _watchdog_items(bigint, bigint, bigint, bigint, integer)
CREATE FUNCTION sandbox_persist._watchdog_items(now_ms bigint, reaper_ttl_ms bigint, sweep_interval_ms bigint, idle_ms bigint, per_kind integer) RETURNS TABLE(kind text, run_id text, detail json)
    LANGUAGE sql STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
    -- Each kind lists its oldest items first and stops at per_kind, walking
    -- an index in that order, so a large population costs no more than a
    -- small one.
    (SELECT 'reaper_missing', r.run_id, json_build_object('detachedSince', r.detached_since)
       FROM sandbox_persist.runs r
      WHERE reaper_ttl_ms > 0 AND sweep_interval_ms > 0
        AND r.status = 'running' AND r.detached_since IS NOT NULL
        AND r.detached_since < now_ms - (reaper_ttl_ms + 2 * sweep_interval_ms)
      ORDER BY r.detached_since, r.seq LIMIT per_kind)
    UNION ALL
    SELECT 'reaper_missing', '', json_build_object('detachedRuns', count(*))
      FROM sandbox_persist.runs r
     WHERE sweep_interval_ms > 0 AND r.status = 'running' AND r.detached_since IS NOT NULL
    HAVING count(*) > 0
       AND NOT EXISTS (SELECT 1 FROM sandbox_persist.reaper_heartbeats h
                        WHERE h.seen_at >= now_ms - 2 * sweep_interval_ms)
    UNION ALL
    (SELECT 'invisible_run', r.run_id, NULL
       FROM sandbox_persist.runs r
      WHERE r.status = 'running' AND r.detached_since IS NULL
        AND r.status_changed_at < now_ms - idle_ms AND r.changed_at < now_ms - idle_ms
        AND NOT EXISTS (SELECT 1 FROM sandbox_persist.locks l
                         WHERE l.lock_key = 'run-driver:' || r.run_id AND l.expires_at > now_ms)
        -- a probe per run (run_id is unique), never a join over every log
        AND coalesce((SELECT e.last_append_at FROM sandbox_persist.event_logs e WHERE e.run_id = r.run_id),
                     now_ms - idle_ms - 1) < now_ms - idle_ms
      ORDER BY r.status_changed_at, r.run_id LIMIT per_kind)
    UNION ALL
    (SELECT 'stuck_cancel', r.run_id, NULL
       FROM sandbox_persist.runs r
      WHERE r.status = 'running' AND r.cancel_requested
        AND r.status_changed_at < now_ms - idle_ms AND r.changed_at < now_ms - idle_ms
      ORDER BY r.status_changed_at, r.run_id LIMIT per_kind)
    UNION ALL
    (SELECT 'append_after_close', e.run_id,
            json_build_object('appendsAfterClose', e.appends_after_close)
       FROM sandbox_persist.event_logs e
      WHERE e.appends_after_close > 0
      ORDER BY e.log_id LIMIT per_kind)
$$;

COMMENT ON FUNCTION sandbox_persist._watchdog_items(now_ms bigint, reaper_ttl_ms bigint, sweep_interval_ms bigint, idle_ms bigint, per_kind integer) IS 'Internal, for maintain(): the watchdog items current at now_ms (kind, run_id, detail), judged with the reaper TTL, sweep interval and idle time given, at most per_kind of each kind, the oldest first. Reports only, never acts.';

-- function artifact_delete(text)
CREATE FUNCTION sandbox_persist.artifact_delete(artifact_id text) RETURNS boolean
    LANGUAGE c SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS 'MODULE_PATHNAME', 'artifact_delete';

COMMENT ON FUNCTION sandbox_persist.artifact_delete(artifact_id text) IS 'Artifact store delete: removes the record of artifact_id (not its blob); true when a row was removed.';

-- function artifact_delete_for_run(text)
CREATE FUNCTION sandbox_persist.artifact_delete_for_run(run_id text) RETURNS integer
    LANGUAGE c SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS 'MODULE_PATHNAME', 'artifact_delete_for_run';

COMMENT ON FUNCTION sandbox_persist.artifact_delete_for_run(run_id text) IS 'Artifact store deleteForRun: removes every artifact record of run_id and returns how many.';

-- function artifact_get(text)
CREATE FUNCTION sandbox_persist.artifact_get(artifact_id text) RETURNS json
    LANGUAGE c STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS 'MODULE_PATHNAME', 'artifact_get';

COMMENT ON FUNCTION sandbox_persist.artifact_get(artifact_id text) IS 'Artifact store get: the artifact record of artifact_id as json, or NULL.';

-- function artifact_list(text)
CREATE FUNCTION sandbox_persist.artifact_list(run_id text) RETURNS json
    LANGUAGE c STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS 'MODULE_PATHNAME', 'artifact_list';

COMMENT ON FUNCTION sandbox_persist.artifact_list(run_id text) IS 'Artifact store list: the artifacts of run_id as a json array, by createdAt then id.';

-- function artifact_list_for_thread(text)
CREATE FUNCTION sandbox_persist.artifact_list_for_thread(thread_id text) RETURNS json
    LANGUAGE c STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS 'MODULE_PATHNAME', 'artifact_list_for_thread';

COMMENT ON FUNCTION sandbox_persist.artifact_list_for_thread(thread_id text) IS 'Artifact store listForThread: the artifacts of thread_id as a json array, by createdAt then id.';

-- function artifact_save(json)
CREATE FUNCTION sandbox_persist.artifact_save(record json) RETURNS void
    LANGUAGE c SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS 'MODULE_PATHNAME', 'artifact_save';

COMMENT ON FUNCTION sandbox_persist.artifact_save(record json) IS 'Artifact store save: stores the artifact record {artifactId, runId, threadId, name, mimeType, size, createdAt, blobKey?, sourceUrl?}, replacing any record with that id.';

-- function attention_list()
CREATE FUNCTION sandbox_persist.attention_list() RETURNS json
    LANGUAGE c STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS 'MODULE_PATHNAME', 'attention_list';

COMMENT ON FUNCTION sandbox_persist.attention_list() IS 'The current watchdog items as a json array [{kind, runId?, firstSeen, lastSeen, detail?}], oldest first.';

-- function blob_delete(text)
CREATE FUNCTION sandbox_persist.blob_delete(blob_key text) RETURNS boolean
    LANGUAGE c SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS 'MODULE_PATHNAME', 'blob_delete';

COMMENT ON FUNCTION sandbox_persist.blob_delete(blob_key text) IS 'Blob store delete: removes blob_key and its chunks; true when an object was removed.';

-- function blob_get(text, bigint, bigint)
CREATE FUNCTION sandbox_persist.blob_get(blob_key text, range_offset bigint DEFAULT NULL::bigint, range_length bigint DEFAULT NULL::bigint) RETURNS TABLE(record json, body bytea)
    LANGUAGE c STABLE SECURITY DEFINER ROWS 1
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS 'MODULE_PATHNAME', 'blob_get';

COMMENT ON FUNCTION sandbox_persist.blob_get(blob_key text, range_offset bigint, range_length bigint) IS 'Blob store get: one row (record json, body bytea) for blob_key, or none when absent; range_offset and range_length read a slice.';

-- function blob_head(text, bigint)
CREATE FUNCTION sandbox_persist.blob_head(blob_key text, now_ms bigint DEFAULT NULL::bigint) RETURNS json
    LANGUAGE c SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS 'MODULE_PATHNAME', 'blob_head';

COMMENT ON FUNCTION sandbox_persist.blob_head(blob_key text, now_ms bigint) IS 'Blob store head: the object record of blob_key as json without its bytes, or NULL; refreshes the garbage-collection time of a content-addressed key.';

-- function blob_list(text, text, integer)
CREATE FUNCTION sandbox_persist.blob_list(prefix text DEFAULT NULL::text, list_cursor text DEFAULT NULL::text, page_limit integer DEFAULT NULL::integer) RETURNS json
    LANGUAGE c STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS 'MODULE_PATHNAME', 'blob_list';

COMMENT ON FUNCTION sandbox_persist.blob_list(prefix text, list_cursor text, page_limit integer) IS 'Blob store list: objects whose key starts with prefix, in key order after list_cursor, at most page_limit, as json {objects, truncated, cursor?}.';

-- function blob_put(text, bytea, json, bigint)
CREATE FUNCTION sandbox_persist.blob_put(blob_key text, body bytea, options json DEFAULT NULL::json, now_ms bigint DEFAULT NULL::bigint) RETURNS json
    LANGUAGE c SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS 'MODULE_PATHNAME', 'blob_put';

COMMENT ON FUNCTION sandbox_persist.blob_put(blob_key text, body bytea, options json, now_ms bigint) IS 'Blob store put: writes body under blob_key with options {contentType?, customMetadata?} and returns the object record as json. A content-addressed key must match the SHA-256 of the bytes (SP301).';

-- function blob_upload_abort(text)
CREATE FUNCTION sandbox_persist.blob_upload_abort(upload_id text) RETURNS boolean
    LANGUAGE c SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS 'MODULE_PATHNAME', 'blob_upload_abort';

COMMENT ON FUNCTION sandbox_persist.blob_upload_abort(upload_id text) IS 'Streamed upload abort: discards upload_id and its staged bytes, keeping any existing object; true when an upload was removed.';

-- function blob_upload_append(text, bigint, bytea, bigint)
CREATE FUNCTION sandbox_persist.blob_upload_append(upload_id text, at_offset bigint, bytes bytea, now_ms bigint DEFAULT NULL::bigint) RETURNS json
    LANGUAGE c SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS 'MODULE_PATHNAME', 'blob_upload_append';

COMMENT ON FUNCTION sandbox_persist.blob_upload_append(upload_id text, at_offset bigint, bytes bytea, now_ms bigint) IS 'Streamed upload append: adds bytes to upload_id; at_offset must equal the bytes received so far (SP303). Returns json {received}.';

-- function blob_upload_begin(text, json, bigint)
CREATE FUNCTION sandbox_persist.blob_upload_begin(blob_key text, options json DEFAULT NULL::json, now_ms bigint DEFAULT NULL::bigint) RETURNS text
    LANGUAGE c SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS 'MODULE_PATHNAME', 'blob_upload_begin';

COMMENT ON FUNCTION sandbox_persist.blob_upload_begin(blob_key text, options json, now_ms bigint) IS 'Streamed upload begin: starts an upload to blob_key with options {contentType?, customMetadata?} and returns its upload id.';

-- function blob_upload_commit(text, bigint)
CREATE FUNCTION sandbox_persist.blob_upload_commit(upload_id text, now_ms bigint DEFAULT NULL::bigint) RETURNS json
    LANGUAGE c SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS 'MODULE_PATHNAME', 'blob_upload_commit';

COMMENT ON FUNCTION sandbox_persist.blob_upload_commit(upload_id text, now_ms bigint) IS 'Streamed upload commit: publishes the uploaded bytes as the object (checking a content address, SP301) and returns its record as json.';

-- function checkpoint_acquire_writer(text, bigint, bigint)
CREATE FUNCTION sandbox_persist.checkpoint_acquire_writer(thread_id text, lease_ms bigint DEFAULT NULL::bigint, now_ms bigint DEFAULT NULL::bigint) RETURNS json
    LANGUAGE c SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS 'MODULE_PATHNAME', 'checkpoint_acquire_writer';

COMMENT ON FUNCTION sandbox_persist.checkpoint_acquire_writer(thread_id text, lease_ms bigint, now_ms bigint) IS 'Checkpoint store: takes the single writer lease of thread_id for lease_ms (default: the writer_lease_duration setting) and returns the writer {threadId, ownerToken, fence, expiresAt}; SP005 while another lease is live.';

-- function checkpoint_append(json, json, bigint)
CREATE FUNCTION sandbox_persist.checkpoint_append(input json, conversation json, now_ms bigint DEFAULT NULL::bigint) RETURNS json
    LANGUAGE c SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS 'MODULE_PATHNAME', 'checkpoint_append';

COMMENT ON FUNCTION sandbox_persist.checkpoint_append(input json, conversation json, now_ms bigint) IS 'Checkpoint store append: adds input.checkpoint after input.expectedHeadId under the held writer lease, capturing the conversation array; returns json {headId}. Refuses a stale head, a parent mismatch or a duplicate id (SP001-SP003).';

-- function checkpoint_append_delta(json, json, bigint, bytea, bigint)
CREATE FUNCTION sandbox_persist.checkpoint_append_delta(input json, tail json, prefix_len bigint, prefix_digest bytea, now_ms bigint DEFAULT NULL::bigint) RETURNS json
    LANGUAGE c SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS 'MODULE_PATHNAME', 'checkpoint_append_delta';

COMMENT ON FUNCTION sandbox_persist.checkpoint_append_delta(input json, tail json, prefix_len bigint, prefix_digest bytea, now_ms bigint) IS 'Checkpoint append shipping only the new messages: the conversation is the parent''s first prefix_len messages (their digest prefix_digest, checked against the parent: SP016 SANDBOX_SNAPSHOT_PREFIX_MISMATCH when false, nothing written) followed by tail; otherwise checkpoint_append.';

-- function checkpoint_delete_head(json, bigint)
CREATE FUNCTION sandbox_persist.checkpoint_delete_head(input json, now_ms bigint DEFAULT NULL::bigint) RETURNS void
    LANGUAGE c SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS 'MODULE_PATHNAME', 'checkpoint_delete_head';

COMMENT ON FUNCTION sandbox_persist.checkpoint_delete_head(input json, now_ms bigint) IS 'Checkpoint store deleteHead: removes the head checkpoint named by input {threadId, checkpointId, writer}, making its parent the head; SP004 when it is not the head.';

-- function checkpoint_fork_from_checkpoint(json, bigint)
CREATE FUNCTION sandbox_persist.checkpoint_fork_from_checkpoint(input json, now_ms bigint DEFAULT NULL::bigint) RETURNS json
    LANGUAGE c SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS 'MODULE_PATHNAME', 'checkpoint_fork_from_checkpoint';

COMMENT ON FUNCTION sandbox_persist.checkpoint_fork_from_checkpoint(input json, now_ms bigint) IS 'Checkpoint store forkFromCheckpoint: copies a source checkpoint and its conversation into an empty destination thread as a new root, under the destination writer lease; returns json {checkpoint}.';

-- function checkpoint_get(text)
CREATE FUNCTION sandbox_persist.checkpoint_get(checkpoint_id text) RETURNS json
    LANGUAGE c STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS 'MODULE_PATHNAME', 'checkpoint_get';

COMMENT ON FUNCTION sandbox_persist.checkpoint_get(checkpoint_id text) IS 'Checkpoint store get: the checkpoint of checkpoint_id as json, or NULL.';

-- function checkpoint_get_parts(text)
CREATE FUNCTION sandbox_persist.checkpoint_get_parts(checkpoint_id text) RETURNS SETOF json
    LANGUAGE c STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS 'MODULE_PATHNAME', 'checkpoint_get_parts';

COMMENT ON FUNCTION sandbox_persist.checkpoint_get_parts(checkpoint_id text) IS 'Checkpoint store get, for long conversations: the record of checkpoint_id with "conversation":[] in the first row, then its messages as JSON arrays in order, a row per stored block; no rows when there is none. Concatenating the arrays gives checkpoint_get''s conversation. Called in a select list, rows are made as they are read.';

-- function checkpoint_get_head(text)
CREATE FUNCTION sandbox_persist.checkpoint_get_head(thread_id text) RETURNS text
    LANGUAGE c STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS 'MODULE_PATHNAME', 'checkpoint_get_head';

COMMENT ON FUNCTION sandbox_persist.checkpoint_get_head(thread_id text) IS 'Checkpoint store getHead: the id of the head checkpoint of thread_id, or NULL.';

-- function checkpoint_list(text)
CREATE FUNCTION sandbox_persist.checkpoint_list(thread_id text) RETURNS json
    LANGUAGE c STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS 'MODULE_PATHNAME', 'checkpoint_list';

COMMENT ON FUNCTION sandbox_persist.checkpoint_list(thread_id text) IS 'Checkpoint store list: the checkpoints of thread_id as a json array, by createdAt then id.';

-- function checkpoint_list_blob_references()
CREATE FUNCTION sandbox_persist.checkpoint_list_blob_references() RETURNS json
    LANGUAGE c STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS 'MODULE_PATHNAME', 'checkpoint_list_blob_references';

COMMENT ON FUNCTION sandbox_persist.checkpoint_list_blob_references() IS 'Checkpoint store: every blob key checkpoints reference with its count, as a json array [{key, references}], read in one snapshot.';

-- function checkpoint_release_writer(json)
CREATE FUNCTION sandbox_persist.checkpoint_release_writer(writer json) RETURNS boolean
    LANGUAGE c SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS 'MODULE_PATHNAME', 'checkpoint_release_writer';

COMMENT ON FUNCTION sandbox_persist.checkpoint_release_writer(writer json) IS 'Checkpoint store: releases the lease of writer; false (no error) when it is not the holder.';

-- function checkpoint_renew_writer(json, bigint, bigint)
CREATE FUNCTION sandbox_persist.checkpoint_renew_writer(writer json, lease_ms bigint DEFAULT NULL::bigint, now_ms bigint DEFAULT NULL::bigint) RETURNS json
    LANGUAGE c SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS 'MODULE_PATHNAME', 'checkpoint_renew_writer';

COMMENT ON FUNCTION sandbox_persist.checkpoint_renew_writer(writer json, lease_ms bigint, now_ms bigint) IS 'Checkpoint store: extends the lease of writer by lease_ms and returns {expiresAt}; SP006 once it is lost.';

-- function error_codes()
CREATE FUNCTION sandbox_persist.error_codes() RETURNS json
    LANGUAGE c IMMUTABLE SECURITY DEFINER PARALLEL SAFE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS 'MODULE_PATHNAME', 'error_codes';

COMMENT ON FUNCTION sandbox_persist.error_codes() IS 'The error table of src/errors.h: a json array of {sqlstate, codeName, hint}, one entry per class-SP SQLSTATE with its contract code name and the hint its errors carry (null when only the input can be fixed).';

-- function event_log_append(text, json, json)
CREATE FUNCTION sandbox_persist.event_log_append(run_id text, chunks json, options json DEFAULT NULL::json) RETURNS json
    LANGUAGE c SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS 'MODULE_PATHNAME', 'event_log_append';

COMMENT ON FUNCTION sandbox_persist.event_log_append(run_id text, chunks json, options json) IS 'Durable event log append: adds the chunks array to the log of run_id; options {producerId, producerSeq, fenceEpoch?, withDigests?} make it idempotent and fenced (SP403, SP404). Returns the sequence numbers given, or [{seq, digest}] with withDigests.';

-- function event_log_append_many(json)
CREATE FUNCTION sandbox_persist.event_log_append_many(appends json) RETURNS json
    LANGUAGE c SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS 'MODULE_PATHNAME', 'event_log_append_many';

COMMENT ON FUNCTION sandbox_persist.event_log_append_many(appends json) IS 'Durable event log appends in one statement: [{runId, chunks, options?}, ...], each as event_log_append would make it, in this order, all or none; returns the array of their results. Locks the logs in run_id order, so two batches over the same logs do not deadlock.';

-- function event_log_close(text)
CREATE FUNCTION sandbox_persist.event_log_close(run_id text) RETURNS void
    LANGUAGE c SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS 'MODULE_PATHNAME', 'event_log_close';

COMMENT ON FUNCTION sandbox_persist.event_log_close(run_id text) IS 'Durable event log close: marks the log of run_id closed (idempotent) and notifies its readers on sandbox_persist_event_log.';

-- function event_log_read(text, bigint, integer)
CREATE FUNCTION sandbox_persist.event_log_read(run_id text, after_seq bigint, max_rows integer DEFAULT 1000) RETURNS json
    LANGUAGE c STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS 'MODULE_PATHNAME', 'event_log_read';

COMMENT ON FUNCTION sandbox_persist.event_log_read(run_id text, after_seq bigint, max_rows integer) IS 'Durable event log read: up to max_rows chunks of run_id after after_seq, as json {logId, exists, closed, tail, entries: [{seq, chunk}]}.';

-- function event_log_read_pieces(text, bigint, text, integer)
CREATE FUNCTION sandbox_persist.event_log_read_pieces(run_id text, after_seq bigint, after_digest text, max_rows integer DEFAULT 1000) RETURNS SETOF json
    LANGUAGE c STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS 'MODULE_PATHNAME', 'event_log_read_pieces';

COMMENT ON FUNCTION sandbox_persist.event_log_read_pieces(run_id text, after_seq bigint, after_digest text, max_rows integer) IS 'Durable event log read of a resume token as rows: event_log_read_verified''s read, first {logId, exists, closed, tail, tailDigest}, then its entries [{seq, digest, chunk}, ...] in json arrays of about 16 kB each, oldest first, so a client parses each row as it arrives. The same checks and errors.';

-- function event_log_read_verified(text, bigint, text, integer)
CREATE FUNCTION sandbox_persist.event_log_read_verified(run_id text, after_seq bigint, after_digest text, max_rows integer DEFAULT 1000) RETURNS json
    LANGUAGE c STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS 'MODULE_PATHNAME', 'event_log_read_verified';

COMMENT ON FUNCTION sandbox_persist.event_log_read_verified(run_id text, after_seq bigint, after_digest text, max_rows integer) IS 'Durable event log read of a resume token: like event_log_read, with tailDigest and each entry''s digest; with after_digest, an offset past the tail or whose entry has another digest is SP405 (EVENT_LOG_OFFSET_DIVERGED), never a different stream.';

-- function event_log_snapshot(text)
CREATE FUNCTION sandbox_persist.event_log_snapshot(run_id text) RETURNS json
    LANGUAGE c STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS 'MODULE_PATHNAME', 'event_log_snapshot';

COMMENT ON FUNCTION sandbox_persist.event_log_snapshot(run_id text) IS 'Durable event log snapshot: every chunk of run_id as a json array [{seq, chunk}], [] for an unknown run.';

-- function generation_run_create_or_resume(json)
CREATE FUNCTION sandbox_persist.generation_run_create_or_resume(input json) RETURNS json
    LANGUAGE c SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS 'MODULE_PATHNAME', 'generation_run_create_or_resume';

COMMENT ON FUNCTION sandbox_persist.generation_run_create_or_resume(input json) IS 'Generation run store createOrResume: inserts {runId, threadId, activity, provider, model, startedAt, status?} unless the run exists and returns the stored record as json.';

-- function generation_run_find_latest_for_thread(text)
CREATE FUNCTION sandbox_persist.generation_run_find_latest_for_thread(thread_id text) RETURNS json
    LANGUAGE c STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS 'MODULE_PATHNAME', 'generation_run_find_latest_for_thread';

COMMENT ON FUNCTION sandbox_persist.generation_run_find_latest_for_thread(thread_id text) IS 'Generation run store findLatestForThread: the generation run of thread_id with the greatest startedAt (earliest inserted on ties) as json, or NULL.';

-- function generation_run_get(text)
CREATE FUNCTION sandbox_persist.generation_run_get(run_id text) RETURNS json
    LANGUAGE c STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS 'MODULE_PATHNAME', 'generation_run_get';

COMMENT ON FUNCTION sandbox_persist.generation_run_get(run_id text) IS 'Generation run store get: the generation run record of run_id as json, or NULL.';

-- function generation_run_update(text, json, json)
CREATE FUNCTION sandbox_persist.generation_run_update(run_id text, patch json, clear json DEFAULT NULL::json) RETURNS boolean
    LANGUAGE c SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS 'MODULE_PATHNAME', 'generation_run_update';

COMMENT ON FUNCTION sandbox_persist.generation_run_update(run_id text, patch json, clear json) IS 'Generation run store update: applies patch to run_id, then clears the fields named in the clear array (so a null result can be stored as a value); true when a row changed.';

-- function grant_app_role(regrole)
CREATE FUNCTION sandbox_persist.grant_app_role(app_role regrole) RETURNS void
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
    fn regprocedure;
BEGIN
    EXECUTE format('GRANT USAGE ON SCHEMA sandbox_persist TO %s', app_role);
    FOR fn IN SELECT f FROM sandbox_persist._app_functions() f LOOP
        EXECUTE format('GRANT EXECUTE ON FUNCTION %s TO %s', fn, app_role);
    END LOOP;
END
$$;

COMMENT ON FUNCTION sandbox_persist.grant_app_role(app_role regrole) IS 'Administration: grants app_role USAGE on the schema and EXECUTE on every store function (never the administration ones). Run again after an upgrade adds functions.';

-- function grant_monitor_role(regrole)
CREATE FUNCTION sandbox_persist.grant_monitor_role(monitor_role regrole) RETURNS void
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
BEGIN
    IF monitor_role IS NULL OR NOT EXISTS (SELECT 1 FROM pg_catalog.pg_roles WHERE oid = monitor_role) THEN
        RAISE EXCEPTION 'role % does not exist', coalesce(monitor_role::oid::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = 'grant_monitor_role gives an existing role the metrics.';
    END IF;
    EXECUTE format('GRANT USAGE ON SCHEMA sandbox_persist TO %s', monitor_role);
    EXECUTE format('GRANT EXECUTE ON FUNCTION sandbox_persist.metrics(text[]) TO %s', monitor_role);
END
$$;

COMMENT ON FUNCTION sandbox_persist.grant_monitor_role(monitor_role regrole) IS 'Administration: grants monitor_role (for instance the Prometheus exporter''s login role) USAGE on the schema and EXECUTE on metrics(), nothing else; revoke_app_role withdraws it. Superuser only.';

-- function instance_delete(text)
CREATE FUNCTION sandbox_persist.instance_delete(instance_key text) RETURNS boolean
    LANGUAGE c SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS 'MODULE_PATHNAME', 'instance_delete';

COMMENT ON FUNCTION sandbox_persist.instance_delete(instance_key text) IS 'Sandbox instance store delete: removes the record of instance_key; true when a row was removed, false (no error) for an unknown key.';

-- function instance_gc_candidates(bigint, integer, bigint)
CREATE FUNCTION sandbox_persist.instance_gc_candidates(retention_ms bigint, max_rows integer DEFAULT 100, now_ms bigint DEFAULT NULL::bigint) RETURNS json
    LANGUAGE c STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS 'MODULE_PATHNAME', 'instance_gc_candidates';

COMMENT ON FUNCTION sandbox_persist.instance_gc_candidates(retention_ms bigint, max_rows integer, now_ms bigint) IS 'Instances unchanged for retention_ms that no unfinished run refers to and whose sandbox:<key> lock is free, oldest first, at most max_rows, as json records the application may destroy and then delete. Deletes nothing.';

-- function instance_get(text)
CREATE FUNCTION sandbox_persist.instance_get(instance_key text) RETURNS json
    LANGUAGE c STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS 'MODULE_PATHNAME', 'instance_get';

COMMENT ON FUNCTION sandbox_persist.instance_get(instance_key text) IS 'Sandbox instance store get: the instance record stored under instance_key as json, or NULL.';

-- function instance_upsert(json)
CREATE FUNCTION sandbox_persist.instance_upsert(record json) RETURNS void
    LANGUAGE c SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS 'MODULE_PATHNAME', 'instance_upsert';

COMMENT ON FUNCTION sandbox_persist.instance_upsert(record json) IS 'Sandbox instance store put: replaces the whole record given as json {key, provider, providerSandboxId, threadId, updatedAt, latestSnapshotId?, latestRunId?}.';

-- function interrupt_cancel(text, bigint)
CREATE FUNCTION sandbox_persist.interrupt_cancel(interrupt_id text, now_ms bigint DEFAULT NULL::bigint) RETURNS boolean
    LANGUAGE c SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS 'MODULE_PATHNAME', 'interrupt_cancel';

COMMENT ON FUNCTION sandbox_persist.interrupt_cancel(interrupt_id text, now_ms bigint) IS 'Interrupt store cancel: marks interrupt_id cancelled, keeping any stored response; true when a row changed. now_ms is a test clock.';

-- function interrupt_commit_batch(json, bigint)
CREATE FUNCTION sandbox_persist.interrupt_commit_batch(entries json, now_ms bigint DEFAULT NULL::bigint) RETURNS void
    LANGUAGE c SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS 'MODULE_PATHNAME', 'interrupt_commit_batch';

COMMENT ON FUNCTION sandbox_persist.interrupt_commit_batch(entries json, now_ms bigint) IS 'Interrupt store commitBatch: resolves or cancels every entry of the json array atomically; a duplicate, missing or non-pending id fails the whole batch (SP101-SP103).';

-- function interrupt_create(json)
CREATE FUNCTION sandbox_persist.interrupt_create(record json) RETURNS boolean
    LANGUAGE c SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS 'MODULE_PATHNAME', 'interrupt_create';

COMMENT ON FUNCTION sandbox_persist.interrupt_create(record json) IS 'Interrupt store create: inserts a pending interrupt {interruptId, runId, threadId, requestedAt, payload} unless the id exists (never clobbers); true when inserted.';

-- function interrupt_get(text)
CREATE FUNCTION sandbox_persist.interrupt_get(interrupt_id text) RETURNS json
    LANGUAGE c STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS 'MODULE_PATHNAME', 'interrupt_get';

COMMENT ON FUNCTION sandbox_persist.interrupt_get(interrupt_id text) IS 'Interrupt store get: the interrupt record of interrupt_id as json, or NULL.';

-- function interrupt_list(text)
CREATE FUNCTION sandbox_persist.interrupt_list(thread_id text) RETURNS json
    LANGUAGE c STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS 'MODULE_PATHNAME', 'interrupt_list';

COMMENT ON FUNCTION sandbox_persist.interrupt_list(thread_id text) IS 'Interrupt store list: every interrupt of thread_id as a json array, in request order.';

-- function interrupt_list_by_run(text)
CREATE FUNCTION sandbox_persist.interrupt_list_by_run(run_id text) RETURNS json
    LANGUAGE c STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS 'MODULE_PATHNAME', 'interrupt_list_by_run';

COMMENT ON FUNCTION sandbox_persist.interrupt_list_by_run(run_id text) IS 'Interrupt store listByRun: every interrupt of run_id as a json array, in request order.';

-- function interrupt_list_pending(text)
CREATE FUNCTION sandbox_persist.interrupt_list_pending(thread_id text) RETURNS json
    LANGUAGE c STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS 'MODULE_PATHNAME', 'interrupt_list_pending';

COMMENT ON FUNCTION sandbox_persist.interrupt_list_pending(thread_id text) IS 'Interrupt store listPending: the pending interrupts of thread_id as a json array, in request order.';

-- function interrupt_list_pending_by_run(text)
CREATE FUNCTION sandbox_persist.interrupt_list_pending_by_run(run_id text) RETURNS json
    LANGUAGE c STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS 'MODULE_PATHNAME', 'interrupt_list_pending_by_run';

COMMENT ON FUNCTION sandbox_persist.interrupt_list_pending_by_run(run_id text) IS 'Interrupt store: the pending interrupts of run_id as a json array, in request order.';

-- function interrupt_resolve(text, json, bigint)
CREATE FUNCTION sandbox_persist.interrupt_resolve(interrupt_id text, response json DEFAULT NULL::json, now_ms bigint DEFAULT NULL::bigint) RETURNS boolean
    LANGUAGE c SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS 'MODULE_PATHNAME', 'interrupt_resolve';

COMMENT ON FUNCTION sandbox_persist.interrupt_resolve(interrupt_id text, response json, now_ms bigint) IS 'Interrupt store resolve: marks interrupt_id resolved with the response (SQL NULL clears it); true when a row changed. now_ms is a test clock.';

-- function lock_acquire(text, bigint, bigint)
CREATE FUNCTION sandbox_persist.lock_acquire(lock_key text, ttl_ms bigint, now_ms bigint DEFAULT NULL::bigint) RETURNS json
    LANGUAGE c SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS 'MODULE_PATHNAME', 'lock_acquire';

COMMENT ON FUNCTION sandbox_persist.lock_acquire(lock_key text, ttl_ms bigint, now_ms bigint) IS 'LockStore acquire: takes lock_key for ttl_ms when free or expired and returns {ownerToken, fence, expiresAt}, or NULL at once when another holder is live.';

-- function lock_check(text, text, bigint, bigint)
CREATE FUNCTION sandbox_persist.lock_check(lock_key text, owner_token text, fence bigint, now_ms bigint DEFAULT NULL::bigint) RETURNS boolean
    LANGUAGE c STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS 'MODULE_PATHNAME', 'lock_check';

COMMENT ON FUNCTION sandbox_persist.lock_check(lock_key text, owner_token text, fence bigint, now_ms bigint) IS 'LockStore check: true while owner_token holds lock_key with that fence and the lease has not expired.';

-- function lock_holder(text, bigint)
CREATE FUNCTION sandbox_persist.lock_holder(lock_key text, now_ms bigint DEFAULT NULL::bigint) RETURNS json
    LANGUAGE c STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS 'MODULE_PATHNAME', 'lock_holder';

COMMENT ON FUNCTION sandbox_persist.lock_holder(lock_key text, now_ms bigint) IS 'Diagnostics: the lease row of lock_key as json {fence, acquiredAt, expiresAt, expired}, never the owner token; NULL when there is none.';

-- function lock_release(text, text)
CREATE FUNCTION sandbox_persist.lock_release(lock_key text, owner_token text) RETURNS boolean
    LANGUAGE c SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS 'MODULE_PATHNAME', 'lock_release';

COMMENT ON FUNCTION sandbox_persist.lock_release(lock_key text, owner_token text) IS 'LockStore release: drops lock_key when owner_token holds it and notifies sandbox_persist_lock with the MD5 of the key; true when released.';

-- function lock_renew(text, text, bigint, bigint)
CREATE FUNCTION sandbox_persist.lock_renew(lock_key text, owner_token text, ttl_ms bigint, now_ms bigint DEFAULT NULL::bigint) RETURNS json
    LANGUAGE c SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS 'MODULE_PATHNAME', 'lock_renew';

COMMENT ON FUNCTION sandbox_persist.lock_renew(lock_key text, owner_token text, ttl_ms bigint, now_ms bigint) IS 'LockStore renew: extends the lease of lock_key held with owner_token by ttl_ms and returns {expiresAt}, or NULL when the lease is lost.';

-- function lock_renew_many(json, bigint, bigint)
CREATE FUNCTION sandbox_persist.lock_renew_many(leases json, ttl_ms bigint, now_ms bigint DEFAULT NULL::bigint) RETURNS json
    LANGUAGE c SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS 'MODULE_PATHNAME', 'lock_renew_many';

COMMENT ON FUNCTION sandbox_persist.lock_renew_many(leases json, ttl_ms bigint, now_ms bigint) IS 'LockStore renew of many leases [{key, ownerToken}] in one statement, each by ttl_ms; returns json {renewed: [{key, expiresAt}], lost: [key]}.';

-- function maintain(integer, bigint)
CREATE FUNCTION sandbox_persist.maintain(max_rows integer DEFAULT 100000, now_ms bigint DEFAULT NULL::bigint) RETURNS json
    LANGUAGE c SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    SET lock_timeout TO '2s'
    AS 'MODULE_PATHNAME', 'maintain';

COMMENT ON FUNCTION sandbox_persist.maintain(max_rows integer, now_ms bigint) IS 'One round of safe maintenance, at most max_rows rows per action, taken in batches of 1000 until sandbox_persist.maintenance_time_budget is spent: collects unreferenced content-addressed blobs, idle uploads, expired locks and old logs and runs, closes finished logs, updates watchdog items. Returns the counts as json.';

-- function maintenance_health()
CREATE FUNCTION sandbox_persist.maintenance_health() RETURNS json
    LANGUAGE c STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS 'MODULE_PATHNAME', 'maintenance_health';

COMMENT ON FUNCTION sandbox_persist.maintenance_health() IS 'Whether scheduled maintenance really runs: {ok, scheduled, overdue, failing, problem, jobId, schedule, lastRunAt, boundMs, lastFailureAt, lastFailureMessage, ...}; reads pg_cron''s job and run details as the caller when pg_cron is installed here.';

-- function message_load_thread(text)
CREATE FUNCTION sandbox_persist.message_load_thread(thread_id text) RETURNS json
    LANGUAGE c STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS 'MODULE_PATHNAME', 'message_load_thread';

COMMENT ON FUNCTION sandbox_persist.message_load_thread(thread_id text) IS 'Message store loadThread: the transcript of thread_id as the exact JSON array saved, [] when never saved.';

-- function message_save_thread(text, json)
CREATE FUNCTION sandbox_persist.message_save_thread(thread_id text, messages json) RETURNS void
    LANGUAGE c SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS 'MODULE_PATHNAME', 'message_save_thread';

COMMENT ON FUNCTION sandbox_persist.message_save_thread(thread_id text, messages json) IS 'Message store saveThread: replaces the whole transcript of thread_id with the messages array, kept byte for byte.';

-- function metadata_delete(text, text)
CREATE FUNCTION sandbox_persist.metadata_delete(namespace text, meta_key text) RETURNS boolean
    LANGUAGE c SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS 'MODULE_PATHNAME', 'metadata_delete';

COMMENT ON FUNCTION sandbox_persist.metadata_delete(namespace text, meta_key text) IS 'Metadata store delete: removes (namespace, meta_key); true when a row was removed.';

-- function metadata_get(text, text)
CREATE FUNCTION sandbox_persist.metadata_get(namespace text, meta_key text) RETURNS json
    LANGUAGE c STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS 'MODULE_PATHNAME', 'metadata_get';

COMMENT ON FUNCTION sandbox_persist.metadata_get(namespace text, meta_key text) IS 'Metadata store get: the JSON value stored under (namespace, meta_key), or NULL.';

-- function metadata_set(text, text, json)
CREATE FUNCTION sandbox_persist.metadata_set(namespace text, meta_key text, value json) RETURNS void
    LANGUAGE c SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS 'MODULE_PATHNAME', 'metadata_set';

COMMENT ON FUNCTION sandbox_persist.metadata_set(namespace text, meta_key text, value json) IS 'Metadata store set: stores value (any JSON but null, kept as sent) under (namespace, meta_key), replacing any previous one.';

-- function metrics(text[])
CREATE FUNCTION sandbox_persist.metrics(metric_names text[] DEFAULT NULL::text[]) RETURNS TABLE(name text, type text, labels json, value double precision, help text)
    LANGUAGE sql STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
    -- Each branch is one metric family; its WHERE clause names no column, so
    -- a family not asked for is never computed (a gating one-time filter).
    SELECT 'sandbox_persist_runs', 'gauge', json_build_object('status', v.status), v.n::float8,
           'Runs by status.'
      FROM sandbox_persist.overview o,
           LATERAL (VALUES ('running', o.runs_running), ('interrupted', o.runs_interrupted),
                           ('completed', o.runs_completed), ('failed', o.runs_failed),
                           ('aborted', o.runs_aborted)) v(status, n)
     WHERE metric_names IS NULL OR 'sandbox_persist_runs' = ANY (metric_names)
    UNION ALL
    SELECT 'sandbox_persist_runs_detached', 'gauge', '{}', o.runs_detached::float8,
           'Running runs whose client went away (detachedSince set).'
      FROM sandbox_persist.overview o
     WHERE metric_names IS NULL OR 'sandbox_persist_runs_detached' = ANY (metric_names)
    UNION ALL
    SELECT 'sandbox_persist_runs_detached_past_ttl', 'gauge', '{}', o.runs_detached_past_ttl::float8,
           'Detached running runs older than sandbox_persist.reaper_ttl (0 while it is 0): the reaper is behind.'
      FROM sandbox_persist.overview o
     WHERE metric_names IS NULL OR 'sandbox_persist_runs_detached_past_ttl' = ANY (metric_names)
    UNION ALL
    SELECT 'sandbox_persist_checkpoint_leases_held', 'gauge', '{}', o.checkpoint_leases_held::float8,
           'Checkpoint writer leases not yet expired.'
      FROM sandbox_persist.overview o
     WHERE metric_names IS NULL OR 'sandbox_persist_checkpoint_leases_held' = ANY (metric_names)
    UNION ALL
    SELECT 'sandbox_persist_locks_held', 'gauge', '{}', o.locks_held::float8,
           'Durable locks not yet expired.'
      FROM sandbox_persist.overview o
     WHERE metric_names IS NULL OR 'sandbox_persist_locks_held' = ANY (metric_names)
    UNION ALL
    SELECT 'sandbox_persist_lease_takeovers_total', 'counter', json_build_object('kind', v.kind), v.n::float8,
           'Acquires that took over an expired checkpoint writer lease or lock of another owner.'
      FROM sandbox_persist.overview o,
           LATERAL (VALUES ('checkpoint_writer', o.checkpoint_writer_takeovers),
                           ('lock', o.lock_takeovers)) v(kind, n)
     WHERE metric_names IS NULL OR 'sandbox_persist_lease_takeovers_total' = ANY (metric_names)
    UNION ALL
    SELECT 'sandbox_persist_event_logs_open', 'gauge', '{}', o.event_logs_open::float8,
           'Durable event logs not closed yet.'
      FROM sandbox_persist.overview o
     WHERE metric_names IS NULL OR 'sandbox_persist_event_logs_open' = ANY (metric_names)
    UNION ALL
    SELECT 'sandbox_persist_event_logs_producer_lost', 'gauge', '{}', o.event_logs_producer_lost::float8,
           'Kept event logs that maintenance ended with PRODUCER_LOST because their producer was gone.'
      FROM sandbox_persist.overview o
     WHERE metric_names IS NULL OR 'sandbox_persist_event_logs_producer_lost' = ANY (metric_names)
    UNION ALL
    SELECT 'sandbox_persist_blobs', 'gauge', '{}', o.blobs::float8,
           'Stored blob objects.'
      FROM sandbox_persist.overview o
     WHERE metric_names IS NULL OR 'sandbox_persist_blobs' = ANY (metric_names)
    UNION ALL
    SELECT 'sandbox_persist_blob_raw_bytes', 'gauge', '{}', o.blob_raw_bytes::float8,
           'Total size of the blob objects, uncompressed, in bytes.'
      FROM sandbox_persist.overview o
     WHERE metric_names IS NULL OR 'sandbox_persist_blob_raw_bytes' = ANY (metric_names)
    UNION ALL
    SELECT 'sandbox_persist_blob_stored_bytes', 'gauge', '{}', o.blob_stored_bytes::float8,
           'Bytes the blob contents take in storage after compression.'
      FROM sandbox_persist.overview o
     WHERE metric_names IS NULL OR 'sandbox_persist_blob_stored_bytes' = ANY (metric_names)
    UNION ALL
    SELECT 'sandbox_persist_blobs_awaiting_gc', 'gauge', '{}', o.blobs_awaiting_gc::float8,
           'Content-addressed blobs nothing references; collected once past sandbox_persist.blob_gc_grace.'
      FROM sandbox_persist.overview o
     WHERE metric_names IS NULL OR 'sandbox_persist_blobs_awaiting_gc' = ANY (metric_names)
    UNION ALL
    SELECT 'sandbox_persist_uploads_open', 'gauge', '{}', o.uploads_open::float8,
           'Streamed uploads begun and not yet committed or aborted.'
      FROM sandbox_persist.overview o
     WHERE metric_names IS NULL OR 'sandbox_persist_uploads_open' = ANY (metric_names)
    UNION ALL
    SELECT 'sandbox_persist_gc_backlog_rows', 'gauge', json_build_object('action', b.key), b.value::float8,
           'Rows maintain() would delete now, by action (not bounded by max_rows).'
      FROM sandbox_persist.overview o, json_each_text(o.gc_backlog) b
     WHERE metric_names IS NULL OR 'sandbox_persist_gc_backlog_rows' = ANY (metric_names)
    UNION ALL
    SELECT 'sandbox_persist_attention_items', 'gauge', '{}', o.attention_items::float8,
           'Current watchdog items (attention_list()).'
      FROM sandbox_persist.overview o
     WHERE metric_names IS NULL OR 'sandbox_persist_attention_items' = ANY (metric_names)
    UNION ALL
    SELECT 'sandbox_persist_maintenance_last_run_age_seconds', 'gauge', '{}',
           coalesce(extract(epoch FROM clock_timestamp() - o.maintenance_last_run)::float8,
                    'Infinity'::float8),
           'Seconds since maintain() last ran; +Inf if it never ran.'
      FROM sandbox_persist.overview o
     WHERE metric_names IS NULL OR 'sandbox_persist_maintenance_last_run_age_seconds' = ANY (metric_names)
    UNION ALL
    SELECT 'sandbox_persist_maintenance_last_duration_seconds', 'gauge', '{}',
           coalesce(o.maintenance_last_duration_ms / 1000.0, 'NaN')::float8,
           'How long the last maintain() round took, in seconds; NaN if unknown.'
      FROM sandbox_persist.overview o
     WHERE metric_names IS NULL OR 'sandbox_persist_maintenance_last_duration_seconds' = ANY (metric_names)
    UNION ALL
    SELECT 'sandbox_persist_table_size_bytes', 'gauge', json_build_object('table', c.relname::text),
           pg_catalog.pg_total_relation_size(c.oid)::float8,
           'On-disk size of each table of the extension with its indexes and TOAST, in bytes.'
      FROM pg_catalog.pg_extension e, unnest(e.extconfig) AS t(oid)
      JOIN pg_catalog.pg_class c ON c.oid = t.oid AND c.relkind = 'r'
     WHERE e.extname = 'sandbox_persist'
       AND (metric_names IS NULL OR 'sandbox_persist_table_size_bytes' = ANY (metric_names))
$$;

COMMENT ON FUNCTION sandbox_persist.metrics(metric_names text[]) IS 'Monitoring: one row per Prometheus sample (name with its unit, type gauge or counter, labels as a json object, value, help), read from the overview view so the two agree; metric_names limits the families computed (NULL: all). See docs/monitoring.md.';

-- function reaper_heartbeat(text, json, bigint)
CREATE FUNCTION sandbox_persist.reaper_heartbeat(replica text, summary json DEFAULT NULL::json, now_ms bigint DEFAULT NULL::bigint) RETURNS void
    LANGUAGE c SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS 'MODULE_PATHNAME', 'reaper_heartbeat';

COMMENT ON FUNCTION sandbox_persist.reaper_heartbeat(replica text, summary json, now_ms bigint) IS 'Records that the application reaper of replica just swept, with an optional summary; the watchdog reports detached runs when no heartbeat is recent.';

-- function revoke_app_role(regrole)
CREATE FUNCTION sandbox_persist.revoke_app_role(app_role regrole) RETURNS void
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
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

COMMENT ON FUNCTION sandbox_persist.revoke_app_role(app_role regrole) IS 'Withdraws from an application role everything grant_app_role gave it (USAGE on the schema, EXECUTE on the store functions), so the role can be dropped. Superuser only.';

-- function run_claim(text)
CREATE FUNCTION sandbox_persist.run_claim(run_id text) RETURNS json
    LANGUAGE c SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS 'MODULE_PATHNAME', 'run_claim';

COMMENT ON FUNCTION sandbox_persist.run_claim(run_id text) IS 'Claim step of withRunClaim: raises driverEpoch of an unfinished run to max(driverEpoch + 1, (timeline - 1) * 2^40 + 1) and returns {outcome: claimed, epoch, threadId}, or {outcome: unknown | terminal} with nothing changed. Call it under the run-driver:<runId> lock.';

-- function run_create_or_resume(json)
CREATE FUNCTION sandbox_persist.run_create_or_resume(input json) RETURNS json
    LANGUAGE c SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS 'MODULE_PATHNAME', 'run_create_or_resume';

COMMENT ON FUNCTION sandbox_persist.run_create_or_resume(input json) IS 'Run store createOrResume: inserts {runId, threadId, startedAt, status?} unless the run exists (status defaults to running) and returns the stored run record as json.';

-- function run_find_active_run(text)
CREATE FUNCTION sandbox_persist.run_find_active_run(thread_id text) RETURNS json
    LANGUAGE c STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS 'MODULE_PATHNAME', 'run_find_active_run';

COMMENT ON FUNCTION sandbox_persist.run_find_active_run(thread_id text) IS 'Run store findActiveRun: the newest running run of thread_id as json, or NULL.';

-- function run_get(text)
CREATE FUNCTION sandbox_persist.run_get(run_id text) RETURNS json
    LANGUAGE c STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS 'MODULE_PATHNAME', 'run_get';

COMMENT ON FUNCTION sandbox_persist.run_get(run_id text) IS 'Run store get: the run record of run_id as json, or NULL.';

-- function run_list_by_thread(text)
CREATE FUNCTION sandbox_persist.run_list_by_thread(thread_id text) RETURNS json
    LANGUAGE c STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS 'MODULE_PATHNAME', 'run_list_by_thread';

COMMENT ON FUNCTION sandbox_persist.run_list_by_thread(thread_id text) IS 'Run store listByThread: the runs of thread_id as a json array, by startedAt then insertion order.';

-- function run_list_reclaimable(bigint, bigint, integer)
CREATE FUNCTION sandbox_persist.run_list_reclaimable(caller_now_ms bigint, ttl_ms bigint, max_rows integer DEFAULT NULL::integer) RETURNS json
    LANGUAGE c STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS 'MODULE_PATHNAME', 'run_list_reclaimable';

COMMENT ON FUNCTION sandbox_persist.run_list_reclaimable(caller_now_ms bigint, ttl_ms bigint, max_rows integer) IS 'Run store listReclaimable: running runs detached at or before caller_now_ms - ttl_ms, oldest first, as a json array; all of them (max_rows NULL, the contract''s call) or the first max_rows, for reapers that work in batches (negative is 22023).';

-- function run_update(text, json)
CREATE FUNCTION sandbox_persist.run_update(run_id text, patch json) RETURNS boolean
    LANGUAGE c SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS 'MODULE_PATHNAME', 'run_update';

COMMENT ON FUNCTION sandbox_persist.run_update(run_id text, patch json) IS 'Run store update: applies a key-presence-aware patch (absent keys kept, null clears) to run_id; refuses a driverEpoch that does not grow (SP201). True when a row changed.';

-- function schedule_maintenance(text, integer)
CREATE FUNCTION sandbox_persist.schedule_maintenance(schedule text DEFAULT '* * * * *'::text, max_rows integer DEFAULT 100000) RETURNS bigint
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
    command text := CASE WHEN max_rows IS NULL THEN 'SELECT sandbox_persist.maintain()'
                         ELSE format('SELECT sandbox_persist.maintain(%s)', max_rows) END;
    job bigint;
BEGIN
    IF max_rows < 0 THEN
        RAISE EXCEPTION 'max_rows must not be negative'
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = format('A value of %s was given.', max_rows);
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'pg_cron') THEN
        RAISE EXCEPTION 'pg_cron is not installed in database %', current_database()
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  DETAIL = 'pg_cron runs jobs only from the database named by cron.database_name.',
                  HINT = format('In that database run: SELECT cron.schedule_in_database(%L, %L, %L, %L);',
                                'sandbox_persist_maintenance', schedule, command, current_database());
    END IF;
    job := cron.schedule('sandbox_persist_maintenance', schedule, command);
    PERFORM sandbox_persist._maintenance_scheduled(job, schedule, current_user::text);
    RETURN job;
END
$$;

COMMENT ON FUNCTION sandbox_persist.schedule_maintenance(schedule text, max_rows integer) IS 'Administration: registers maintain(max_rows) as the pg_cron job sandbox_persist_maintenance on the given cron schedule and returns its job id. Runs as its caller; needs pg_cron in this database.';

-- function stream_append(text, text, bytea, json, bigint)
CREATE FUNCTION sandbox_persist.stream_append(path text, content_type text, body bytea, options json DEFAULT NULL::json, now_ms bigint DEFAULT NULL::bigint) RETURNS json
    LANGUAGE c SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS 'MODULE_PATHNAME', 'stream_append';

COMMENT ON FUNCTION sandbox_persist.stream_append(path text, content_type text, body bytea, options json, now_ms bigint) IS 'Durable stream append (docs/contract/streams.md §4): one body as one entry (a JSON body flattened one level), and/or close; options {close, producerId, producerEpoch, producerSeq, streamSeq}; returns json {outcome: appended|duplicate|closed, streamId, nextOffset, closed, producerEpoch?, producerSeq?} and notifies sandbox_persist_stream.';

-- function stream_create(text, text, json, bytea, bigint)
CREATE FUNCTION sandbox_persist.stream_create(path text, content_type text, options json DEFAULT NULL::json, body bytea DEFAULT NULL::bytea, now_ms bigint DEFAULT NULL::bigint) RETURNS json
    LANGUAGE c SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS 'MODULE_PATHNAME', 'stream_create';

COMMENT ON FUNCTION sandbox_persist.stream_create(path text, content_type text, options json, body bytea, now_ms bigint) IS 'Durable stream create (docs/contract/streams.md §4): a stream at path, or a fork of another (options forkedFrom, forkOffset, forkSubOffset) that copies no entries, with an optional first body; options also ttlSeconds, expiresAt, closed. Returns json {created, streamId, contentType, nextOffset, closed, ttlSeconds?, expiresAt?}; created is false when an identical stream exists.';

-- function stream_delete(text, bigint)
CREATE FUNCTION sandbox_persist.stream_delete(path text, now_ms bigint DEFAULT NULL::bigint) RETURNS json
    LANGUAGE c SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS 'MODULE_PATHNAME', 'stream_delete';

COMMENT ON FUNCTION sandbox_persist.stream_delete(path text, now_ms bigint) IS 'Durable stream delete (docs/contract/streams.md §4): soft-deleted (410, path blocked) while forks read through it, else detached for maintain() (A13) to purge; returns json {softDeleted}.';

-- function stream_head(text, text, bigint)
CREATE FUNCTION sandbox_persist.stream_head(path text, producer_id text DEFAULT NULL::text, now_ms bigint DEFAULT NULL::bigint) RETURNS json
    LANGUAGE c STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS 'MODULE_PATHNAME', 'stream_head';

COMMENT ON FUNCTION sandbox_persist.stream_head(path text, producer_id text, now_ms bigint) IS 'Durable stream head (docs/contract/streams.md §4): json {streamId, contentType, nextOffset, closed, ttlSeconds?, expiresAt?, producer?: {epoch, lastSeq}}; does not renew the TTL. A path run-logs/<run_id> answers for that run''s event log (streams.md §1): {streamId, contentType, nextOffset, closed}.';

-- function stream_read(text, text, integer, bigint)
CREATE FUNCTION sandbox_persist.stream_read(path text, "offset" text DEFAULT '-1'::text, max_bytes integer DEFAULT 1048576, now_ms bigint DEFAULT NULL::bigint, OUT meta json, OUT body bytea) RETURNS record
    LANGUAGE c SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS 'MODULE_PATHNAME', 'stream_read';

COMMENT ON FUNCTION sandbox_persist.stream_read(path text, "offset" text, max_bytes integer, now_ms bigint, OUT meta json, OUT body bytea) IS 'Durable stream read (docs/contract/streams.md §4): whole entries from offset (-1, now or one the stream issued; SP708 otherwise) up to max_bytes, at least one, through the fork chain; meta {streamId, contentType, startOffset, nextOffset, upToDate, closed, ttlSeconds?, expiresAt?}, body the bytes (a JSON array for JSON streams). Renews a sliding TTL. A path run-logs/<run_id> reads that run''s event log as a JSON stream (streams.md §1; streamId "eventLog:<logId>").';

-- function unschedule_maintenance()
CREATE FUNCTION sandbox_persist.unschedule_maintenance() RETURNS boolean
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
BEGIN
    PERFORM sandbox_persist._maintenance_unscheduled();
    IF NOT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'pg_cron') THEN
        RETURN false;
    END IF;
    IF NOT EXISTS (SELECT 1 FROM cron.job WHERE jobname = 'sandbox_persist_maintenance') THEN
        RETURN false;
    END IF;
    RETURN cron.unschedule('sandbox_persist_maintenance');
END
$$;

COMMENT ON FUNCTION sandbox_persist.unschedule_maintenance() IS 'Administration: removes the pg_cron job sandbox_persist_maintenance; false when there was none.';


SET default_tablespace = '';

SET default_table_access_method = heap;

-- table artifacts
CREATE TABLE sandbox_persist.artifacts (
    artifact_id text NOT NULL COLLATE pg_catalog."C",
    run_id text NOT NULL COLLATE pg_catalog."C",
    thread_id text NOT NULL COLLATE pg_catalog."C",
    blob_key text COLLATE pg_catalog."C",
    name text COLLATE pg_catalog."C" NOT NULL,
    mime_type text COLLATE pg_catalog."C" NOT NULL,
    size bigint NOT NULL,
    source_url text COLLATE pg_catalog."C",
    created_at double precision NOT NULL,
    CONSTRAINT artifacts_created_at_check CHECK (((created_at <> 'Infinity'::double precision) AND (created_at <> '-Infinity'::double precision) AND (created_at <> 'NaN'::double precision))),
    CONSTRAINT artifacts_size_check CHECK ((size >= 0))
);

COMMENT ON TABLE sandbox_persist.artifacts IS 'Artifact store: records of files a run produced (name, MIME type, size, optional blob key or source URL).';

-- table attention
CREATE TABLE sandbox_persist.attention (
    kind text COLLATE pg_catalog."C" NOT NULL,
    run_id text NOT NULL COLLATE pg_catalog."C",
    first_seen bigint NOT NULL,
    last_seen bigint NOT NULL,
    detail json
);

COMMENT ON TABLE sandbox_persist.attention IS 'Watchdog items maintenance currently reports (a missing reaper, invisible runs, stuck cancels, appends after close), with when each was first and last seen: at most 100 of each kind, the oldest (an item also leaves when older ones fill its kind).';

-- table blob_chunks
CREATE TABLE sandbox_persist.blob_chunks (
    version bigint NOT NULL,
    chunk_offset bigint NOT NULL,
    raw_length integer NOT NULL,
    codec smallint NOT NULL,
    data bytea NOT NULL,
    CONSTRAINT blob_chunks_codec_check CHECK ((codec = ANY (ARRAY[0, 1, 2]))),
    CONSTRAINT blob_chunks_raw_length_check CHECK ((raw_length > 0))
);
ALTER TABLE ONLY sandbox_persist.blob_chunks ALTER COLUMN data SET STORAGE EXTERNAL;

COMMENT ON TABLE sandbox_persist.blob_chunks IS 'The bytes of blob versions, cut into chunks each stored raw, zstd- or lz4-compressed (the codec recorded per chunk); a range read decodes only the chunks it overlaps.';

-- sequence blob_etags
CREATE SEQUENCE sandbox_persist.blob_etags
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;

COMMENT ON SEQUENCE sandbox_persist.blob_etags IS 'Source of blob etags: every write of a key gets a new one.';

-- table blob_gc_queue
CREATE TABLE sandbox_persist.blob_gc_queue (
    blob_key text COLLATE pg_catalog."C" NOT NULL,
    queued_at bigint NOT NULL
);

COMMENT ON TABLE sandbox_persist.blob_gc_queue IS 'Content-addressed blob keys that lost a checkpoint reference or an artifact record, with when: maintenance (A1) looks at each such blob again, oldest first, and drops the entry. Duplicates are allowed, so removing references never waits on another transaction.';

-- table blob_uploads
CREATE TABLE sandbox_persist.blob_uploads (
    upload_id uuid NOT NULL,
    blob_key text NOT NULL COLLATE pg_catalog."C",
    version bigint NOT NULL,
    content_type text COLLATE pg_catalog."C",
    custom_metadata json,
    chunk_size integer NOT NULL,
    received bigint DEFAULT 0 NOT NULL,
    tail bytea DEFAULT '\x'::bytea NOT NULL,
    created_at bigint NOT NULL,
    touched_at bigint NOT NULL
);

COMMENT ON TABLE sandbox_persist.blob_uploads IS 'Streamed uploads in progress: the staged version, the bytes received so far and the tail not yet filling a chunk. Invisible to readers until commit; idle ones are removed by maintenance.';

-- sequence blob_versions
CREATE SEQUENCE sandbox_persist.blob_versions
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;

COMMENT ON SEQUENCE sandbox_persist.blob_versions IS 'Numbers each staged blob version (a put or an upload), so a new version never reuses the chunks of an old one.';

-- table blobs
CREATE TABLE sandbox_persist.blobs (
    blob_key text NOT NULL COLLATE pg_catalog."C",
    version bigint NOT NULL,
    size bigint NOT NULL,
    etag text COLLATE pg_catalog."C" NOT NULL,
    content_type text COLLATE pg_catalog."C",
    custom_metadata json,
    created_at bigint NOT NULL,
    updated_at bigint NOT NULL,
    relied_on_at bigint,
    replaced_version bigint,
    inline_codec smallint,
    inline_data bytea,
    gc_settled boolean DEFAULT false NOT NULL,
    CONSTRAINT blobs_inline_codec CHECK ((inline_codec = ANY (ARRAY[0, 1, 2]))),
    CONSTRAINT blobs_inline_whole CHECK (((inline_codec IS NULL) = (inline_data IS NULL))),
    CONSTRAINT blobs_size_check CHECK ((size >= 0))
);
ALTER TABLE ONLY sandbox_persist.blobs ALTER COLUMN inline_data SET STORAGE EXTERNAL;

COMMENT ON TABLE sandbox_persist.blobs IS 'Blob store objects: one row per key with size, etag, content type and custom metadata, pointing at the version whose chunks hold the bytes.';

COMMENT ON COLUMN sandbox_persist.blobs.gc_settled IS 'True once maintenance (A1) found the blob referenced: it leaves the blobs_gc index until a reference to it goes away (blob_gc_queue).';

-- table checkpoint_blob_refs
CREATE TABLE sandbox_persist.checkpoint_blob_refs (
    checkpoint_id text NOT NULL COLLATE pg_catalog."C",
    blob_key text NOT NULL COLLATE pg_catalog."C"
);

COMMENT ON TABLE sandbox_persist.checkpoint_blob_refs IS 'One row per (checkpoint, distinct blob key) it references; blob reference counts and blob garbage collection are derived from these rows.';

-- table checkpoint_threads
CREATE TABLE sandbox_persist.checkpoint_threads (
    thread_id text NOT NULL COLLATE pg_catalog."C",
    fence bigint DEFAULT 0 NOT NULL,
    owner_token uuid,
    lease_expires_at bigint,
    head_id text COLLATE pg_catalog."C",
    conv_log_end bigint DEFAULT 0 NOT NULL
);

COMMENT ON TABLE sandbox_persist.checkpoint_threads IS 'One row per checkpoint thread: its lock point, writer lease (owner token, expiry, ever-growing fence) and head checkpoint. Never deleted by maintenance, so the fence never restarts.';

-- table checkpoints
CREATE TABLE sandbox_persist.checkpoints (
    checkpoint_id text NOT NULL COLLATE pg_catalog."C",
    thread_id text NOT NULL COLLATE pg_catalog."C",
    parent_id text COLLATE pg_catalog."C",
    created_at double precision NOT NULL,
    reason text COLLATE pg_catalog."C" NOT NULL,
    label text COLLATE pg_catalog."C",
    source_run_id text COLLATE pg_catalog."C",
    files json NOT NULL,
    artifacts json NOT NULL,
    conv_ranges int8multirange NOT NULL,
    conv_block int8range NOT NULL,
    conv_len integer NOT NULL,
    conv_digest bytea NOT NULL
);

COMMENT ON TABLE sandbox_persist.checkpoints IS 'Sandbox checkpoints: parent link, reason, label, canonical file entries and artifacts, and the conversation they captured as ranges of their thread''s conversation log, with its length and digest.';

-- table conversation_garbage
CREATE TABLE sandbox_persist.conversation_garbage (
    thread_id text NOT NULL COLLATE pg_catalog."C",
    block int8range NOT NULL
);

COMMENT ON TABLE sandbox_persist.conversation_garbage IS 'Log blocks appended by checkpoints that deleteHead removed, queued for maintain() (action A11) to delete.';

-- table conversation_blocks
CREATE TABLE sandbox_persist.conversation_blocks (
    thread_id text NOT NULL COLLATE pg_catalog."C",
    first_pos bigint NOT NULL,
    message_count integer NOT NULL,
    bodies text COLLATE pg_catalog."C" NOT NULL,
    CONSTRAINT conversation_blocks_message_count_check CHECK ((message_count > 0))
);
ALTER TABLE ONLY sandbox_persist.conversation_blocks ALTER COLUMN bodies SET COMPRESSION lz4;

COMMENT ON TABLE sandbox_persist.conversation_blocks IS 'Each thread''s conversation log, a block per append or fork: the messages at positions first_pos .. first_pos + message_count - 1, their exact JSON text joined by commas and compressed; a checkpoint''s conversation is a set of ranges of the log made of whole blocks.';

-- table event_log_entries
CREATE TABLE sandbox_persist.event_log_entries (
    log_id bigint NOT NULL,
    seq bigint NOT NULL,
    chunk json NOT NULL,
    digest bigint NOT NULL
);

COMMENT ON TABLE sandbox_persist.event_log_entries IS 'Event log chunks, numbered densely from 1 per log and stored as their exact JSON text.';

COMMENT ON COLUMN sandbox_persist.event_log_entries.digest IS 'Running digest of the log up to this entry: XOR over entries 1..seq of the first 8 bytes of sha256(int8send(seq) || chunk text); the second half of a resume token.';

-- table event_log_producers
CREATE TABLE sandbox_persist.event_log_producers (
    log_id bigint NOT NULL,
    producer_id uuid NOT NULL,
    producer_seq bigint NOT NULL,
    first_seq bigint NOT NULL,
    chunk_count integer NOT NULL
);

COMMENT ON TABLE sandbox_persist.event_log_producers IS 'The sequence numbers handed to each (producerId, producerSeq) append, so a retried append gets the same numbers instead of a duplicate.';

-- table event_logs
CREATE TABLE sandbox_persist.event_logs (
    log_id bigint NOT NULL,
    run_id text NOT NULL COLLATE pg_catalog."C",
    tail_seq bigint DEFAULT 0 NOT NULL,
    created_at bigint NOT NULL,
    last_append_at bigint NOT NULL,
    closed_at bigint,
    appends_after_close bigint DEFAULT 0 NOT NULL,
    tail_digest bigint DEFAULT 0 NOT NULL,
    lost_tail_seq bigint,
    epoch_first_seqs bigint[],
    epochs bigint[]
);

COMMENT ON TABLE sandbox_persist.event_logs IS 'Durable event log headers: one log per run with its last sequence number, last append time, close time and the count of appends accepted after close.';

COMMENT ON COLUMN sandbox_persist.event_logs.tail_digest IS 'The running digest of the entry at tail_seq (0 for an empty log), continued by the next append.';

COMMENT ON COLUMN sandbox_persist.event_logs.lost_tail_seq IS 'The sequence number of the PRODUCER_LOST chunk maintenance (A10) ended the log with; NULL for a log it never ended. The log still ends that way while this equals tail_seq.';

COMMENT ON COLUMN sandbox_persist.event_logs.epoch_first_seqs IS 'The epoch transitions of the log (docs/contract/streams.md §1), with epochs: entries from epoch_first_seqs[i] on have epoch epochs[i] in their stream offsets (run-logs/<run_id>), entries before the first have epoch 0. Ascending; NULL while the log never changed epoch. An append adds one only when the timeline''s epoch is above the log''s last (after a failover or a point-in-time recovery).';

COMMENT ON COLUMN sandbox_persist.event_logs.epochs IS 'The epochs of the transitions in epoch_first_seqs (same positions), strictly increasing; the last is the epoch of the log''s newest entries. NULL while the log never changed epoch (epoch 0).';

-- sequence event_logs_log_id_seq
ALTER TABLE sandbox_persist.event_logs ALTER COLUMN log_id ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME sandbox_persist.event_logs_log_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);

-- table generation_runs
CREATE TABLE sandbox_persist.generation_runs (
    seq bigint NOT NULL,
    run_id text NOT NULL COLLATE pg_catalog."C",
    thread_id text NOT NULL COLLATE pg_catalog."C",
    activity text COLLATE pg_catalog."C" NOT NULL,
    provider text COLLATE pg_catalog."C" NOT NULL,
    model text COLLATE pg_catalog."C" NOT NULL,
    status text COLLATE pg_catalog."C" NOT NULL,
    started_at bigint NOT NULL,
    finished_at bigint,
    error json,
    result json,
    artifacts json,
    usage json,
    CONSTRAINT generation_runs_status_check CHECK ((status = ANY (ARRAY['running'::text, 'interrupted'::text, 'completed'::text, 'failed'::text, 'aborted'::text])))
);

COMMENT ON TABLE sandbox_persist.generation_runs IS 'Generation run store: one row per media generation run (activity, provider, model) with its status, result, artifacts and usage.';

-- sequence generation_runs_seq_seq
ALTER TABLE sandbox_persist.generation_runs ALTER COLUMN seq ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME sandbox_persist.generation_runs_seq_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);

-- table instances
CREATE TABLE sandbox_persist.instances (
    instance_key text NOT NULL COLLATE pg_catalog."C",
    provider text COLLATE pg_catalog."C" NOT NULL,
    provider_sandbox_id text COLLATE pg_catalog."C" NOT NULL,
    latest_snapshot_id text COLLATE pg_catalog."C",
    thread_id text NOT NULL COLLATE pg_catalog."C",
    latest_run_id text COLLATE pg_catalog."C",
    updated_at bigint NOT NULL
);

COMMENT ON TABLE sandbox_persist.instances IS 'Sandbox instance store: one row per instance key naming the provider sandbox to resume, its thread, latest snapshot and latest run.';

-- table interrupts
CREATE TABLE sandbox_persist.interrupts (
    seq bigint NOT NULL,
    interrupt_id text NOT NULL COLLATE pg_catalog."C",
    run_id text NOT NULL COLLATE pg_catalog."C",
    thread_id text NOT NULL COLLATE pg_catalog."C",
    status text COLLATE pg_catalog."C" NOT NULL,
    requested_at bigint NOT NULL,
    resolved_at bigint,
    payload json NOT NULL,
    response json,
    CONSTRAINT interrupts_check CHECK (((status = 'pending'::text) = (resolved_at IS NULL))),
    CONSTRAINT interrupts_status_check CHECK ((status = ANY (ARRAY['pending'::text, 'resolved'::text, 'cancelled'::text])))
);

COMMENT ON TABLE sandbox_persist.interrupts IS 'Interrupt store: human-in-the-loop requests of a run, pending until resolved (with an optional response) or cancelled.';

-- sequence interrupts_seq_seq
ALTER TABLE sandbox_persist.interrupts ALTER COLUMN seq ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME sandbox_persist.interrupts_seq_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);

-- table lease_takeovers
CREATE TABLE sandbox_persist.lease_takeovers (
    kind text NOT NULL COLLATE pg_catalog."C",
    slot smallint NOT NULL,
    takeovers bigint NOT NULL
);

COMMENT ON TABLE sandbox_persist.lease_takeovers IS 'Durable count of lease takeovers (an acquire granted over an expired checkpoint writer lease or lock of another owner), by kind, spread over per-backend slots; summed by the overview view.';

-- sequence lock_fences
CREATE SEQUENCE sandbox_persist.lock_fences
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;

COMMENT ON SEQUENCE sandbox_persist.lock_fences IS 'Lock fences for every key: one global sequence, so a fence keeps growing across release, takeover and purge.';

-- table locks
CREATE TABLE sandbox_persist.locks (
    lock_key text NOT NULL COLLATE pg_catalog."C",
    owner_token uuid NOT NULL,
    fence bigint NOT NULL,
    acquired_at bigint NOT NULL,
    expires_at bigint NOT NULL
);

COMMENT ON TABLE sandbox_persist.locks IS 'LockStore leases: one row per held key with its owner token, fence and server-clock expiry. Expired rows are purged by maintenance.';

-- table maintenance_schedule
CREATE TABLE sandbox_persist.maintenance_schedule (
    id integer NOT NULL,
    job_id bigint NOT NULL,
    schedule text COLLATE pg_catalog."C" NOT NULL,
    username text COLLATE pg_catalog."C" NOT NULL,
    scheduled_at bigint NOT NULL,
    CONSTRAINT maintenance_schedule_id_check CHECK ((id = 1))
);

COMMENT ON TABLE sandbox_persist.maintenance_schedule IS 'A single row: the pg_cron job schedule_maintenance created (job id, schedule, the role it runs as, when), read by maintenance_health() to tell when maintenance is expected but not running.';

-- table maintenance_state
CREATE TABLE sandbox_persist.maintenance_state (
    id integer NOT NULL,
    last_run_at bigint NOT NULL,
    last_summary json NOT NULL,
    last_duration_ms bigint,
    CONSTRAINT maintenance_state_id_check CHECK ((id = 1))
);

COMMENT ON TABLE sandbox_persist.maintenance_state IS 'A single row: when maintain() last ran and the counts it returned, shown by the overview view.';

COMMENT ON COLUMN sandbox_persist.maintenance_state.last_duration_ms IS 'Wall-clock milliseconds the last maintain() round took; NULL until a round runs under 0.4.0.';

-- table messages
CREATE TABLE sandbox_persist.messages (
    thread_id text NOT NULL COLLATE pg_catalog."C",
    transcript json NOT NULL,
    updated_at bigint NOT NULL
);

COMMENT ON TABLE sandbox_persist.messages IS 'Message store: the whole transcript of each chat thread as the exact JSON text last saved.';

-- table metadata
CREATE TABLE sandbox_persist.metadata (
    namespace text NOT NULL COLLATE pg_catalog."C",
    meta_key text NOT NULL COLLATE pg_catalog."C",
    value json NOT NULL
);

COMMENT ON TABLE sandbox_persist.metadata IS 'Metadata store: any non-null JSON value under a (namespace, key) pair.';

-- table row_counts
CREATE TABLE sandbox_persist.row_counts (
    counter text COLLATE pg_catalog."C" NOT NULL,
    backend_pid integer NOT NULL,
    value bigint NOT NULL
);

COMMENT ON TABLE sandbox_persist.row_counts IS 'Counters the overview reads instead of counting tables: runs by status, blob objects and bytes. Triggers add each change to the changing backend''s own row (backend_pid), so no two transactions wait on one row; maintain() folds the rows of backends that have exited into backend_pid 0. Not dumped: a restore rebuilds them as it loads the tables.';

-- table runs
CREATE TABLE sandbox_persist.runs (
    seq bigint NOT NULL,
    run_id text NOT NULL COLLATE pg_catalog."C",
    thread_id text NOT NULL COLLATE pg_catalog."C",
    status text COLLATE pg_catalog."C" NOT NULL,
    started_at bigint NOT NULL,
    finished_at bigint,
    error json,
    usage json,
    sandbox_key text COLLATE pg_catalog."C",
    detached_since bigint,
    cancel_requested boolean,
    driver_epoch bigint,
    changed_at bigint NOT NULL,
    status_changed_at bigint DEFAULT 0 NOT NULL,
    CONSTRAINT runs_driver_epoch_check CHECK ((driver_epoch >= 0)),
    CONSTRAINT runs_status_check CHECK ((status = ANY (ARRAY['running'::text, 'interrupted'::text, 'completed'::text, 'failed'::text, 'aborted'::text])))
)
WITH (fillfactor='90');

COMMENT ON TABLE sandbox_persist.runs IS 'Run store: one row per agent run with its status, timing, error and usage, plus the durable fields (sandbox key, detachedSince, cancelRequested, driverEpoch) used for takeover.';

COMMENT ON COLUMN sandbox_persist.runs.status_changed_at IS 'Server clock (epoch ms) of the last change of status; never later than changed_at. 0 = unknown.';

-- view overview
CREATE VIEW sandbox_persist.overview AS
 WITH now_ms AS (
         SELECT ((EXTRACT(epoch FROM clock_timestamp()) * (1000)::numeric))::bigint AS now,
            sandbox_persist._reaper_ttl_ms() AS reaper_ttl
        ), health AS (
         SELECT sandbox_persist.maintenance_health() AS h
        )
 SELECT sandbox_persist._row_count('runs.running'::text) AS runs_running,
    sandbox_persist._row_count('runs.interrupted'::text) AS runs_interrupted,
    sandbox_persist._row_count('runs.completed'::text) AS runs_completed,
    sandbox_persist._row_count('runs.failed'::text) AS runs_failed,
    sandbox_persist._row_count('runs.aborted'::text) AS runs_aborted,
    ( SELECT count(*) AS count
           FROM sandbox_persist.runs
          WHERE ((runs.status = 'running'::text) AND (runs.detached_since IS NOT NULL))) AS runs_detached,
    ( SELECT count(*) AS count
           FROM sandbox_persist.runs,
            now_ms
          WHERE ((runs.status = 'running'::text) AND (runs.detached_since IS NOT NULL) AND (now_ms.reaper_ttl > 0) AND (runs.detached_since <= (now_ms.now - now_ms.reaper_ttl)))) AS runs_detached_past_ttl,
    ( SELECT count(*) AS count
           FROM sandbox_persist.locks,
            now_ms
          WHERE (locks.expires_at > now_ms.now)) AS locks_held,
    ( SELECT count(*) AS count
           FROM sandbox_persist.event_logs
          WHERE (event_logs.closed_at IS NULL)) AS event_logs_open,
    sandbox_persist._row_count('blobs'::text) AS blobs,
    (sandbox_persist._row_count('blob_raw_bytes'::text))::numeric AS blob_raw_bytes,
    sandbox_persist._row_count('blob_stored_bytes'::text) AS blob_stored_bytes,
    sandbox_persist._blobs_awaiting_gc(NULL::bigint, 1000) AS blobs_awaiting_gc,
    ( SELECT count(*) AS count
           FROM sandbox_persist.blob_uploads) AS uploads_open,
    (( SELECT count(*) AS count
           FROM sandbox_persist.attention) + ( SELECT ((((health.h ->> 'overdue'::text))::boolean)::integer + (((health.h ->> 'failing'::text))::boolean)::integer)
           FROM health)) AS attention_items,
    ( SELECT to_timestamp((((maintenance_state.last_run_at)::numeric / 1000.0))::double precision) AS to_timestamp
           FROM sandbox_persist.maintenance_state) AS maintenance_last_run,
    ( SELECT maintenance_state.last_summary
           FROM sandbox_persist.maintenance_state) AS maintenance_last_summary,
    ( SELECT count(*) AS count
           FROM sandbox_persist.checkpoint_threads,
            now_ms
          WHERE ((checkpoint_threads.owner_token IS NOT NULL) AND (checkpoint_threads.lease_expires_at > now_ms.now))) AS checkpoint_leases_held,
    ( SELECT count(*) AS count
           FROM sandbox_persist.event_logs l
          WHERE ((l.lost_tail_seq IS NOT NULL) AND (l.lost_tail_seq = l.tail_seq) AND (l.closed_at IS NOT NULL))) AS event_logs_producer_lost,
    ( SELECT COALESCE(sum(lease_takeovers.takeovers), (0)::numeric) AS "coalesce"
           FROM sandbox_persist.lease_takeovers
          WHERE (lease_takeovers.kind = 'checkpoint_writer'::text)) AS checkpoint_writer_takeovers,
    ( SELECT COALESCE(sum(lease_takeovers.takeovers), (0)::numeric) AS "coalesce"
           FROM sandbox_persist.lease_takeovers
          WHERE (lease_takeovers.kind = 'lock'::text)) AS lock_takeovers,
    ( SELECT maintenance_state.last_duration_ms
           FROM sandbox_persist.maintenance_state) AS maintenance_last_duration_ms,
    sandbox_persist._maintenance_backlog() AS gc_backlog,
    ( SELECT ((health.h ->> 'scheduled'::text))::boolean AS bool
           FROM health) AS maintenance_scheduled,
    ( SELECT ((health.h ->> 'overdue'::text))::boolean AS bool
           FROM health) AS maintenance_overdue,
    ( SELECT ((health.h ->> 'failing'::text))::boolean AS bool
           FROM health) AS maintenance_failing,
    ( SELECT (health.h ->> 'lastFailureMessage'::text)
           FROM health) AS maintenance_last_failure,
    ( SELECT health.h
           FROM health) AS maintenance_health;

COMMENT ON VIEW sandbox_persist.overview IS 'One row for operators: runs by status, detached runs, held locks and leases, lease takeovers, open and producer-lost logs, blob counts and bytes, blobs awaiting collection, the GC backlog, open uploads, watchdog items, the last maintenance run and whether scheduled maintenance really runs (maintenance_health()).';

COMMENT ON COLUMN sandbox_persist.overview.runs_running IS 'Runs whose status is running.';

COMMENT ON COLUMN sandbox_persist.overview.runs_interrupted IS 'Runs paused for a person (status interrupted).';

COMMENT ON COLUMN sandbox_persist.overview.runs_completed IS 'Runs whose status is completed.';

COMMENT ON COLUMN sandbox_persist.overview.runs_failed IS 'Runs whose status is failed.';

COMMENT ON COLUMN sandbox_persist.overview.runs_aborted IS 'Runs whose status is aborted.';

COMMENT ON COLUMN sandbox_persist.overview.runs_detached IS 'Running runs whose client went away (detachedSince set), waiting for a takeover or the reaper.';

COMMENT ON COLUMN sandbox_persist.overview.runs_detached_past_ttl IS 'Detached running runs older than the reaper TTL (sandbox_persist.reaper_ttl); 0 while that setting is 0.';

COMMENT ON COLUMN sandbox_persist.overview.locks_held IS 'Lock leases not yet expired.';

COMMENT ON COLUMN sandbox_persist.overview.event_logs_open IS 'Event logs not closed yet.';

COMMENT ON COLUMN sandbox_persist.overview.blobs IS 'Stored blob objects.';

COMMENT ON COLUMN sandbox_persist.overview.blob_raw_bytes IS 'Total size of the blob objects, uncompressed.';

COMMENT ON COLUMN sandbox_persist.overview.blob_stored_bytes IS 'Bytes the blob chunks (those of uploads in progress included) and inline objects take in storage, after compression; kept as a counter (row_counts).';

COMMENT ON COLUMN sandbox_persist.overview.blobs_awaiting_gc IS 'Content-addressed blobs no checkpoint or artifact references, within their grace or past it: maintenance deletes them once past sandbox_persist.blob_gc_grace. Counted among the oldest 1000 blobs maintenance has yet to look at and the oldest 1000 queued keys, so a lower bound when more wait.';

COMMENT ON COLUMN sandbox_persist.overview.uploads_open IS 'Streamed uploads begun and not yet committed or aborted.';

COMMENT ON COLUMN sandbox_persist.overview.attention_items IS 'Current watchdog items (see attention_list()): the recorded ones plus maintenance_failing and maintenance_overdue, judged now.';

COMMENT ON COLUMN sandbox_persist.overview.maintenance_last_run IS 'When maintain() last ran; NULL if never.';

COMMENT ON COLUMN sandbox_persist.overview.maintenance_last_summary IS 'The counts the last maintain() returned.';

COMMENT ON COLUMN sandbox_persist.overview.checkpoint_leases_held IS 'Checkpoint writer leases not yet expired.';

COMMENT ON COLUMN sandbox_persist.overview.event_logs_producer_lost IS 'Kept event logs that maintenance ended because their producer was gone (their last chunk is the RUN_ERROR with code PRODUCER_LOST).';

COMMENT ON COLUMN sandbox_persist.overview.checkpoint_writer_takeovers IS 'Checkpoint writer acquires that took over an expired lease of another owner, ever (since 0.4.0).';

COMMENT ON COLUMN sandbox_persist.overview.lock_takeovers IS 'Lock acquires that took over an expired lock of another owner, ever (since 0.4.0).';

COMMENT ON COLUMN sandbox_persist.overview.maintenance_last_duration_ms IS 'How long the last maintain() round took, in wall-clock milliseconds; NULL if none has run since 0.4.0.';

COMMENT ON COLUMN sandbox_persist.overview.gc_backlog IS 'What maintain() would collect now, by action: json {blobs, uploads, locks, eventLogs, runs, conversationBlocks} (see _maintenance_backlog()).';

COMMENT ON COLUMN sandbox_persist.overview.maintenance_scheduled IS 'Whether maintenance is scheduled: recorded by schedule_maintenance, or a pg_cron job of that name for this database.';

COMMENT ON COLUMN sandbox_persist.overview.maintenance_overdue IS 'True when maintain() has not completed within the bound although maintenance is scheduled (maintenance_health().boundMs).';

COMMENT ON COLUMN sandbox_persist.overview.maintenance_failing IS 'True when pg_cron''s latest finished run of the maintenance job failed and maintain() has not completed since.';

COMMENT ON COLUMN sandbox_persist.overview.maintenance_last_failure IS 'The message of pg_cron''s latest failed run of the maintenance job (cron.job_run_details), when visible to this role.';

COMMENT ON COLUMN sandbox_persist.overview.maintenance_health IS 'The whole maintenance_health() report: schedule, bound, last run, pg_cron''s last runs and what is wrong.';

-- table reaper_heartbeats
CREATE TABLE sandbox_persist.reaper_heartbeats (
    replica text NOT NULL COLLATE pg_catalog."C",
    seen_at bigint NOT NULL,
    summary json
);

COMMENT ON TABLE sandbox_persist.reaper_heartbeats IS 'The last heartbeat of each application reaper replica, with the summary it sent; the watchdog reports detached runs when none is recent.';

-- sequence runs_seq_seq
ALTER TABLE sandbox_persist.runs ALTER COLUMN seq ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME sandbox_persist.runs_seq_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);

-- table stream_entries
CREATE TABLE sandbox_persist.stream_entries (
    stream_id bigint NOT NULL,
    seq bigint NOT NULL,
    epoch bigint NOT NULL,
    message_count integer NOT NULL,
    data bytea NOT NULL,
    CONSTRAINT stream_entries_message_count_check CHECK ((message_count > 0))
);

COMMENT ON TABLE sandbox_persist.stream_entries IS 'Durable stream entries, one per append, numbered densely from 1 per stream (a fork''s from its fork point): the body''s bytes, or for a JSON stream its messages'' exact text joined by commas; epoch is the high half of the offset after it.';

-- table stream_producers
CREATE TABLE sandbox_persist.stream_producers (
    stream_id bigint NOT NULL,
    producer_id text NOT NULL COLLATE pg_catalog."C",
    epoch bigint NOT NULL,
    last_seq bigint NOT NULL
);

COMMENT ON TABLE sandbox_persist.stream_producers IS 'Idempotent producers of each durable stream: the epoch a producer declared and the last sequence number appended in it.';

-- table streams
CREATE TABLE sandbox_persist.streams (
    stream_id bigint NOT NULL,
    path text COLLATE pg_catalog."C",
    content_type text NOT NULL COLLATE pg_catalog."C",
    json_mode boolean NOT NULL,
    ttl_seconds bigint,
    expires_at bigint,
    created_at bigint NOT NULL,
    touched_at bigint NOT NULL,
    closed_at bigint,
    closed_producer text COLLATE pg_catalog."C",
    closed_epoch bigint,
    closed_seq bigint,
    tail_seq bigint DEFAULT 0 NOT NULL,
    tail_epoch bigint DEFAULT 0 NOT NULL,
    stream_seq text COLLATE pg_catalog."C",
    source_id bigint,
    fork_seq bigint,
    fork_offset text COLLATE pg_catalog."C",
    fork_sub_offset bigint,
    fork_count bigint DEFAULT 0 NOT NULL,
    deleted_at bigint,
    producer_fence bigint,
    CONSTRAINT streams_ttl_or_expiry CHECK (((ttl_seconds IS NULL) OR (expires_at IS NULL)))
);

COMMENT ON TABLE sandbox_persist.streams IS 'Durable streams (docs/contract/streams.md): one row per stream, with its content type, TTL or expiry, tail offset, closed state and closing producer tuple, last Stream-Seq, fork source and fork point, the count of forks reading through it and its soft delete.';

COMMENT ON COLUMN sandbox_persist.streams.path IS 'The stream''s path while it is visible or soft-deleted (a soft-deleted path stays taken); NULL once detached, for maintain() (A13) to purge.';

COMMENT ON COLUMN sandbox_persist.streams.touched_at IS 'The last read or write (ms), for the sliding TTL; a read rewrites it at most once per ttl_seconds * 1000 / 16 ms, at most 60 s apart.';

COMMENT ON COLUMN sandbox_persist.streams.fork_count IS 'How many forks read through this stream; a delete while it is positive is a soft delete.';

COMMENT ON COLUMN sandbox_persist.streams.producer_fence IS 'The highest producer epoch accepted by an append with streamFence (docs/contract/streams.md §4): any producer below it is refused (SP706), whatever its id. NULL until such an append.';

-- sequence streams_stream_id_seq
ALTER TABLE sandbox_persist.streams ALTER COLUMN stream_id ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME sandbox_persist.streams_stream_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);

-- table thread_moves
CREATE TABLE sandbox_persist.thread_moves (
    thread_id text NOT NULL COLLATE pg_catalog."C",
    state text COLLATE pg_catalog."C" NOT NULL,
    peer_shard integer NOT NULL,
    since bigint NOT NULL,
    CONSTRAINT thread_moves_state_check CHECK ((state = ANY (ARRAY['moving'::text, 'dropping'::text, 'moved'::text, 'imported'::text])))
);

COMMENT ON TABLE sandbox_persist.thread_moves IS 'Threads moving out of this shard (''moving''), moved out (''moved'': a tombstone that keeps refusing writes a stale route sends here) or imported into it (''imported'' until the router finishes the move); the write guard reads it.';

-- view thread_owned_state
CREATE VIEW sandbox_persist.thread_owned_state AS
 SELECT messages.thread_id,
    'transcript'::text AS source
   FROM sandbox_persist.messages
UNION ALL
 SELECT runs.thread_id,
    'run'::text AS source
   FROM sandbox_persist.runs
UNION ALL
 SELECT checkpoints.thread_id,
    'checkpoint'::text AS source
   FROM sandbox_persist.checkpoints
UNION ALL
 SELECT checkpoint_threads.thread_id,
    'head'::text AS source
   FROM sandbox_persist.checkpoint_threads
  WHERE (checkpoint_threads.head_id IS NOT NULL)
UNION ALL
 SELECT generation_runs.thread_id,
    'generation run'::text AS source
   FROM sandbox_persist.generation_runs
UNION ALL
 SELECT interrupts.thread_id,
    'interrupt'::text AS source
   FROM sandbox_persist.interrupts
UNION ALL
 SELECT artifacts.thread_id,
    'artifact'::text AS source
   FROM sandbox_persist.artifacts;

COMMENT ON VIEW sandbox_persist.thread_owned_state IS 'Registry of thread-scoped state (thread_id, source) that makes a fork destination not empty. A store that keeps rows per thread adds a branch here.';

COMMENT ON COLUMN sandbox_persist.thread_owned_state.thread_id IS 'A thread that holds state a fork destination must not have.';

COMMENT ON COLUMN sandbox_persist.thread_owned_state.source IS 'What the state is: transcript, run, checkpoint, head, generation run, interrupt or artifact.';

-- constraint artifacts artifacts_pkey
ALTER TABLE ONLY sandbox_persist.artifacts
    ADD CONSTRAINT artifacts_pkey PRIMARY KEY (artifact_id);

-- constraint attention attention_pkey
ALTER TABLE ONLY sandbox_persist.attention
    ADD CONSTRAINT attention_pkey PRIMARY KEY (kind, run_id);

-- constraint blob_chunks blob_chunks_pkey
ALTER TABLE ONLY sandbox_persist.blob_chunks
    ADD CONSTRAINT blob_chunks_pkey PRIMARY KEY (version, chunk_offset);

-- constraint blob_uploads blob_uploads_pkey
ALTER TABLE ONLY sandbox_persist.blob_uploads
    ADD CONSTRAINT blob_uploads_pkey PRIMARY KEY (upload_id);

-- constraint blobs blobs_pkey
ALTER TABLE ONLY sandbox_persist.blobs
    ADD CONSTRAINT blobs_pkey PRIMARY KEY (blob_key);

-- constraint checkpoint_blob_refs checkpoint_blob_refs_pkey
ALTER TABLE ONLY sandbox_persist.checkpoint_blob_refs
    ADD CONSTRAINT checkpoint_blob_refs_pkey PRIMARY KEY (checkpoint_id, blob_key);

-- constraint checkpoint_threads checkpoint_threads_pkey
ALTER TABLE ONLY sandbox_persist.checkpoint_threads
    ADD CONSTRAINT checkpoint_threads_pkey PRIMARY KEY (thread_id);

-- constraint checkpoints checkpoints_pkey
ALTER TABLE ONLY sandbox_persist.checkpoints
    ADD CONSTRAINT checkpoints_pkey PRIMARY KEY (checkpoint_id);

-- constraint conversation_garbage conversation_garbage_pkey
ALTER TABLE ONLY sandbox_persist.conversation_garbage
    ADD CONSTRAINT conversation_garbage_pkey PRIMARY KEY (thread_id, block);

-- constraint conversation_blocks conversation_blocks_pkey
ALTER TABLE ONLY sandbox_persist.conversation_blocks
    ADD CONSTRAINT conversation_blocks_pkey PRIMARY KEY (thread_id, first_pos);

-- constraint event_log_entries event_log_entries_pkey
ALTER TABLE ONLY sandbox_persist.event_log_entries
    ADD CONSTRAINT event_log_entries_pkey PRIMARY KEY (log_id, seq);

-- constraint event_log_producers event_log_producers_pkey
ALTER TABLE ONLY sandbox_persist.event_log_producers
    ADD CONSTRAINT event_log_producers_pkey PRIMARY KEY (log_id, producer_id, producer_seq);

-- constraint event_logs event_logs_pkey
ALTER TABLE ONLY sandbox_persist.event_logs
    ADD CONSTRAINT event_logs_pkey PRIMARY KEY (log_id);

-- constraint event_logs event_logs_run_id_key
ALTER TABLE ONLY sandbox_persist.event_logs
    ADD CONSTRAINT event_logs_run_id_key UNIQUE (run_id);

-- constraint generation_runs generation_runs_pkey
ALTER TABLE ONLY sandbox_persist.generation_runs
    ADD CONSTRAINT generation_runs_pkey PRIMARY KEY (run_id);

-- constraint instances instances_pkey
ALTER TABLE ONLY sandbox_persist.instances
    ADD CONSTRAINT instances_pkey PRIMARY KEY (instance_key);

-- constraint interrupts interrupts_pkey
ALTER TABLE ONLY sandbox_persist.interrupts
    ADD CONSTRAINT interrupts_pkey PRIMARY KEY (interrupt_id);

-- constraint lease_takeovers lease_takeovers_pkey
ALTER TABLE ONLY sandbox_persist.lease_takeovers
    ADD CONSTRAINT lease_takeovers_pkey PRIMARY KEY (kind, slot);

-- constraint locks locks_pkey
ALTER TABLE ONLY sandbox_persist.locks
    ADD CONSTRAINT locks_pkey PRIMARY KEY (lock_key);

-- constraint maintenance_schedule maintenance_schedule_pkey
ALTER TABLE ONLY sandbox_persist.maintenance_schedule
    ADD CONSTRAINT maintenance_schedule_pkey PRIMARY KEY (id);

-- constraint maintenance_state maintenance_state_pkey
ALTER TABLE ONLY sandbox_persist.maintenance_state
    ADD CONSTRAINT maintenance_state_pkey PRIMARY KEY (id);

-- constraint messages messages_pkey
ALTER TABLE ONLY sandbox_persist.messages
    ADD CONSTRAINT messages_pkey PRIMARY KEY (thread_id);

-- constraint metadata metadata_pkey
ALTER TABLE ONLY sandbox_persist.metadata
    ADD CONSTRAINT metadata_pkey PRIMARY KEY (namespace, meta_key);

-- constraint reaper_heartbeats reaper_heartbeats_pkey
ALTER TABLE ONLY sandbox_persist.reaper_heartbeats
    ADD CONSTRAINT reaper_heartbeats_pkey PRIMARY KEY (replica);

-- constraint row_counts row_counts_pkey
ALTER TABLE ONLY sandbox_persist.row_counts
    ADD CONSTRAINT row_counts_pkey PRIMARY KEY (counter, backend_pid);

-- constraint runs runs_pkey
ALTER TABLE ONLY sandbox_persist.runs
    ADD CONSTRAINT runs_pkey PRIMARY KEY (run_id);

-- constraint stream_entries stream_entries_pkey
ALTER TABLE ONLY sandbox_persist.stream_entries
    ADD CONSTRAINT stream_entries_pkey PRIMARY KEY (stream_id, seq);

-- constraint stream_producers stream_producers_pkey
ALTER TABLE ONLY sandbox_persist.stream_producers
    ADD CONSTRAINT stream_producers_pkey PRIMARY KEY (stream_id, producer_id);

-- constraint streams streams_pkey
ALTER TABLE ONLY sandbox_persist.streams
    ADD CONSTRAINT streams_pkey PRIMARY KEY (stream_id);

-- constraint streams streams_path_key
ALTER TABLE ONLY sandbox_persist.streams
    ADD CONSTRAINT streams_path_key UNIQUE (path);

-- constraint thread_moves thread_moves_pkey
ALTER TABLE ONLY sandbox_persist.thread_moves
    ADD CONSTRAINT thread_moves_pkey PRIMARY KEY (thread_id);

-- index artifacts_blob_key
CREATE INDEX artifacts_blob_key ON sandbox_persist.artifacts USING btree (blob_key) WHERE (blob_key IS NOT NULL);

-- index artifacts_run_order
CREATE INDEX artifacts_run_order ON sandbox_persist.artifacts USING btree (run_id, created_at, artifact_id);

-- index artifacts_thread_order
CREATE INDEX artifacts_thread_order ON sandbox_persist.artifacts USING btree (thread_id, created_at, artifact_id);

-- index blob_chunks_lz4
CREATE INDEX blob_chunks_lz4 ON sandbox_persist.blob_chunks USING btree (version, chunk_offset) WHERE (codec = 2);

COMMENT ON INDEX sandbox_persist.blob_chunks_lz4 IS 'The lz4 chunks (codec 2), in key order: what maintain() rewrites as zstd under blob_recompress (A12); empty when lz4 is not used.';

-- index blob_gc_queue_order
CREATE INDEX blob_gc_queue_order ON sandbox_persist.blob_gc_queue USING btree (queued_at);

COMMENT ON INDEX sandbox_persist.blob_gc_queue_order IS 'The queue in arrival order: maintenance takes the oldest entries first.';

-- index blobs_gc
CREATE INDEX blobs_gc ON sandbox_persist.blobs USING btree (relied_on_at) WHERE ((relied_on_at IS NOT NULL) AND (NOT gc_settled));

COMMENT ON INDEX sandbox_persist.blobs_gc IS 'The content-addressed blobs maintenance (A1) may yet collect, by when they were last put or headed: settled ones (referenced when last looked at) are left out.';

-- index blobs_inline_lz4
CREATE INDEX blobs_inline_lz4 ON sandbox_persist.blobs USING btree (blob_key) WHERE (inline_codec = 2);

COMMENT ON INDEX sandbox_persist.blobs_inline_lz4 IS 'The lz4 inline objects (inline_codec 2): what maintain() rewrites as zstd under blob_recompress (A12); empty when lz4 is not used.';

-- index checkpoint_blob_refs_key
CREATE INDEX checkpoint_blob_refs_key ON sandbox_persist.checkpoint_blob_refs USING btree (blob_key);

-- index checkpoint_threads_leased
CREATE INDEX checkpoint_threads_leased ON sandbox_persist.checkpoint_threads USING btree (lease_expires_at) WHERE (owner_token IS NOT NULL);

COMMENT ON INDEX sandbox_persist.checkpoint_threads_leased IS 'Threads with a writer lease recorded: the overview counts the unexpired ones without reading every thread.';

-- index checkpoints_thread_order
CREATE INDEX checkpoints_thread_order ON sandbox_persist.checkpoints USING btree (thread_id, created_at, checkpoint_id);

-- index event_logs_appended_after_close
CREATE INDEX event_logs_appended_after_close ON sandbox_persist.event_logs USING btree (log_id) WHERE (appends_after_close > 0);

COMMENT ON INDEX sandbox_persist.event_logs_appended_after_close IS 'The logs that counted appends after close: the watchdog lists them (append_after_close) without reading every log.';

-- index event_logs_closed
CREATE INDEX event_logs_closed ON sandbox_persist.event_logs USING btree (closed_at) WHERE (closed_at IS NOT NULL);

-- index event_logs_open
CREATE INDEX event_logs_open ON sandbox_persist.event_logs USING btree (log_id) WHERE (closed_at IS NULL);

-- index event_logs_producer_lost
CREATE INDEX event_logs_producer_lost ON sandbox_persist.event_logs USING btree (log_id) WHERE (lost_tail_seq IS NOT NULL);

COMMENT ON INDEX sandbox_persist.event_logs_producer_lost IS 'The logs maintenance ended with PRODUCER_LOST (A10): the overview counts them without reading any entry.';

-- index generation_runs_thread_started
CREATE INDEX generation_runs_thread_started ON sandbox_persist.generation_runs USING btree (thread_id, started_at, seq);

-- index instances_latest_run
CREATE INDEX instances_latest_run ON sandbox_persist.instances USING btree (latest_run_id);

-- index instances_updated
CREATE INDEX instances_updated ON sandbox_persist.instances USING btree (updated_at, instance_key);

COMMENT ON INDEX sandbox_persist.instances_updated IS 'Instances by age: instance_gc_candidates walks the oldest first and stops at max_rows, instead of sorting every row.';

-- index interrupts_run_order
CREATE INDEX interrupts_run_order ON sandbox_persist.interrupts USING btree (run_id, requested_at, seq);

-- index interrupts_thread_order
CREATE INDEX interrupts_thread_order ON sandbox_persist.interrupts USING btree (thread_id, requested_at, seq);

-- index locks_expiry
CREATE INDEX locks_expiry ON sandbox_persist.locks USING btree (expires_at);

-- index runs_reclaimable
CREATE INDEX runs_reclaimable ON sandbox_persist.runs USING btree (detached_since, seq) WHERE ((status = 'running'::text) AND (detached_since IS NOT NULL));

-- index runs_running
CREATE INDEX runs_running ON sandbox_persist.runs USING btree (status_changed_at) WHERE (status = 'running'::text);

-- index runs_sandbox_key
CREATE INDEX runs_sandbox_key ON sandbox_persist.runs USING btree (sandbox_key) WHERE (sandbox_key IS NOT NULL);

-- index runs_terminal
CREATE INDEX runs_terminal ON sandbox_persist.runs USING btree (status_changed_at) WHERE (status = ANY (ARRAY['completed'::text, 'failed'::text, 'aborted'::text]));

-- index runs_thread_started
CREATE INDEX runs_thread_started ON sandbox_persist.runs USING btree (thread_id, started_at, seq);

-- index streams_detached
CREATE INDEX streams_detached ON sandbox_persist.streams USING btree (stream_id) WHERE (path IS NULL);

COMMENT ON INDEX sandbox_persist.streams_detached IS 'The detached streams (deleted or expired, no fork reading through them): maintain() (A13) purges their entries, producers and rows.';

-- index streams_expires
CREATE INDEX streams_expires ON sandbox_persist.streams USING btree (expires_at) WHERE ((expires_at IS NOT NULL) AND (path IS NOT NULL) AND (deleted_at IS NULL));

COMMENT ON INDEX sandbox_persist.streams_expires IS 'The live streams with an absolute expiry, soonest first: maintain() (A13) finds the expired ones without reading every stream.';

-- index streams_ttl
CREATE INDEX streams_ttl ON sandbox_persist.streams USING btree (touched_at) WHERE ((ttl_seconds IS NOT NULL) AND (path IS NOT NULL) AND (deleted_at IS NULL));

COMMENT ON INDEX sandbox_persist.streams_ttl IS 'The live streams with a sliding TTL, least recently touched first: maintain() (A13) finds the expired ones among them.';

------------------------------------------------------------------------------
-- Stream subscriptions (docs/contract/streams.md §7; the Durable Streams
-- protocol's §6-7): durable cursors over streams that wake a worker by
-- webhook or by an event in a pull-wake stream, with a generation that fences
-- stale callbacks and a lease. Two new tables and the functions below;
-- stream_create links a new stream to the subscriptions whose pattern it
-- matches, stream_append wakes the idle subscriptions of the stream it
-- appended to, stream_delete drops the stream's links.

-- table stream_subscriptions
CREATE TABLE sandbox_persist.stream_subscriptions (
    subscription_id text NOT NULL COLLATE pg_catalog."C",
    kind text NOT NULL COLLATE pg_catalog."C",
    pattern text COLLATE pg_catalog."C",
    webhook_url text COLLATE pg_catalog."C",
    wake_stream text COLLATE pg_catalog."C",
    lease_ttl_ms integer NOT NULL,
    description text COLLATE pg_catalog."C",
    config text NOT NULL COLLATE pg_catalog."C",
    created_at bigint NOT NULL,
    generation bigint DEFAULT 0 NOT NULL,
    wake_id text COLLATE pg_catalog."C",
    wake_snapshot json,
    token_hash bytea,
    holder text COLLATE pg_catalog."C",
    lease_expires_at bigint,
    delivery_due_at bigint,
    failed_attempts integer DEFAULT 0 NOT NULL,
    CONSTRAINT stream_subscriptions_kind_check CHECK ((kind = ANY (ARRAY['webhook'::text, 'pull-wake'::text]))),
    CONSTRAINT stream_subscriptions_delivery CHECK (((kind = 'webhook'::text) = (webhook_url IS NOT NULL)) AND ((kind = 'pull-wake'::text) = (wake_stream IS NOT NULL))),
    CONSTRAINT stream_subscriptions_lease_ttl_ms_check CHECK (((lease_ttl_ms >= 1000) AND (lease_ttl_ms <= 600000)))
);

COMMENT ON TABLE sandbox_persist.stream_subscriptions IS 'Durable stream subscriptions (docs/contract/streams.md §7): the configuration as given (config is its canonical text, compared on re-confirmation), the current wake (generation, wake_id, the stream tails it was issued for), the bearer token''s SHA-256, the pull-wake holder and lease, and the webhook delivery schedule.';

COMMENT ON COLUMN sandbox_persist.stream_subscriptions.wake_id IS 'The wake in flight, NULL while the subscription is idle; a callback, ack or release must name it and the generation.';

COMMENT ON COLUMN sandbox_persist.stream_subscriptions.delivery_due_at IS 'When the webhook of the current wake is due to be sent (ms); moved ahead while a server delivers it, NULL once delivered (then lease_expires_at bounds the wait for the callback).';

-- table stream_subscription_links
CREATE TABLE sandbox_persist.stream_subscription_links (
    subscription_id text NOT NULL COLLATE pg_catalog."C",
    path text NOT NULL COLLATE pg_catalog."C",
    explicit boolean NOT NULL,
    glob boolean NOT NULL,
    acked_offset text NOT NULL COLLATE pg_catalog."C",
    CONSTRAINT stream_subscription_links_kind CHECK ((explicit OR glob))
);

COMMENT ON TABLE sandbox_persist.stream_subscription_links IS 'The streams of each subscription: linked explicitly, by its pattern or both, with the last offset acknowledged (inclusive); a stream has pending work while its tail sorts after acked_offset.';

-- constraint stream_subscriptions stream_subscriptions_pkey
ALTER TABLE ONLY sandbox_persist.stream_subscriptions
    ADD CONSTRAINT stream_subscriptions_pkey PRIMARY KEY (subscription_id);

-- constraint stream_subscription_links stream_subscription_links_pkey
ALTER TABLE ONLY sandbox_persist.stream_subscription_links
    ADD CONSTRAINT stream_subscription_links_pkey PRIMARY KEY (subscription_id, path);

-- fk stream_subscription_links stream_subscription_links_subscription_id_fkey
ALTER TABLE ONLY sandbox_persist.stream_subscription_links
    ADD CONSTRAINT stream_subscription_links_subscription_id_fkey FOREIGN KEY (subscription_id) REFERENCES sandbox_persist.stream_subscriptions(subscription_id) ON DELETE CASCADE;

-- index stream_subscription_links_path
CREATE INDEX stream_subscription_links_path ON sandbox_persist.stream_subscription_links USING btree (path);

COMMENT ON INDEX sandbox_persist.stream_subscription_links_path IS 'The subscriptions of a stream: an append finds the ones to wake with one probe (none for a stream nobody subscribed to).';

-- index stream_subscriptions_due
CREATE INDEX stream_subscriptions_due ON sandbox_persist.stream_subscriptions USING btree (delivery_due_at) WHERE (delivery_due_at IS NOT NULL);

COMMENT ON INDEX sandbox_persist.stream_subscriptions_due IS 'The webhook deliveries owed, soonest first (stream_subscription_deliveries).';

-- index stream_subscriptions_leases
CREATE INDEX stream_subscriptions_leases ON sandbox_persist.stream_subscriptions USING btree (lease_expires_at) WHERE ((lease_expires_at IS NOT NULL) AND (delivery_due_at IS NULL));

COMMENT ON INDEX sandbox_persist.stream_subscriptions_leases IS 'The leases running (a delivered webhook awaiting its callback, a claimed pull-wake), soonest expiry first (stream_subscription_deliveries expires them).';

-- index stream_subscriptions_patterns
CREATE INDEX stream_subscriptions_patterns ON sandbox_persist.stream_subscriptions USING btree (subscription_id) INCLUDE (pattern) WHERE (pattern IS NOT NULL);

COMMENT ON INDEX sandbox_persist.stream_subscriptions_patterns IS 'The subscriptions with a pattern, which a new stream is matched against (stream_create).';

SELECT pg_catalog.pg_extension_config_dump('stream_subscriptions', '');
SELECT pg_catalog.pg_extension_config_dump('stream_subscription_links', '');

-- function stream_glob_match(text, text)
CREATE FUNCTION sandbox_persist.stream_glob_match(pattern text, path text) RETURNS boolean
    LANGUAGE c IMMUTABLE STRICT SECURITY DEFINER PARALLEL SAFE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS 'MODULE_PATHNAME', 'stream_glob_match';

COMMENT ON FUNCTION sandbox_persist.stream_glob_match(pattern text, path text) IS 'Whether a stream path matches a subscription pattern (docs/contract/streams.md §7): segments split at /, * within a segment matches any run of characters but /, a whole segment ** matches zero or more segments.';

-- function stream_subscription_put(text, json, bigint)
CREATE FUNCTION sandbox_persist.stream_subscription_put(subscription_id text, config json, now_ms bigint DEFAULT NULL::bigint) RETURNS json
    LANGUAGE c SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS 'MODULE_PATHNAME', 'stream_subscription_put';

COMMENT ON FUNCTION sandbox_persist.stream_subscription_put(subscription_id text, config json, now_ms bigint) IS 'Create or re-confirm a stream subscription (docs/contract/streams.md §7): config {type: webhook|pull-wake, pattern?, streams?, webhook?: {url}, wake_stream?, lease_ttl_ms?, description?}; existing streams it names or matches are linked at their tail. Returns json {created, subscription}; SP710 when the id exists with another configuration, SP711 for a webhook URL the SSRF rules refuse.';

-- function stream_subscription_get(text, bigint)
CREATE FUNCTION sandbox_persist.stream_subscription_get(subscription_id text, now_ms bigint DEFAULT NULL::bigint) RETURNS json
    LANGUAGE c STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS 'MODULE_PATHNAME', 'stream_subscription_get';

COMMENT ON FUNCTION sandbox_persist.stream_subscription_get(subscription_id text, now_ms bigint) IS 'A stream subscription (docs/contract/streams.md §7): json {id, subscription_id, type, pattern, streams: [{path, link_type, acked_offset}], webhook, wake_stream, lease_ttl_ms, created_at, status, description}; SP709 when absent.';

-- function stream_subscription_delete(text)
CREATE FUNCTION sandbox_persist.stream_subscription_delete(subscription_id text) RETURNS json
    LANGUAGE c SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS 'MODULE_PATHNAME', 'stream_subscription_delete';

COMMENT ON FUNCTION sandbox_persist.stream_subscription_delete(subscription_id text) IS 'Delete a stream subscription and its links (docs/contract/streams.md §7); a callback, ack or release of it fails afterwards. Returns json {deleted: true}; SP709 when absent.';

-- function stream_subscription_link(text, text[], bigint)
CREATE FUNCTION sandbox_persist.stream_subscription_link(subscription_id text, streams text[], now_ms bigint DEFAULT NULL::bigint) RETURNS json
    LANGUAGE c SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS 'MODULE_PATHNAME', 'stream_subscription_link';

COMMENT ON FUNCTION sandbox_persist.stream_subscription_link(subscription_id text, streams text[], now_ms bigint) IS 'Link streams to a subscription explicitly (docs/contract/streams.md §7), each at its tail; linking one already linked changes nothing. Returns json {linked}; SP709 when the subscription is absent.';

-- function stream_subscription_unlink(text, text)
CREATE FUNCTION sandbox_persist.stream_subscription_unlink(subscription_id text, path text) RETURNS json
    LANGUAGE c SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS 'MODULE_PATHNAME', 'stream_subscription_unlink';

COMMENT ON FUNCTION sandbox_persist.stream_subscription_unlink(subscription_id text, path text) IS 'Remove a stream''s explicit link (docs/contract/streams.md §7); a link by the pattern stays. Returns json {unlinked}; SP709 when the subscription is absent.';

-- function stream_subscription_claim(text, text, bigint)
CREATE FUNCTION sandbox_persist.stream_subscription_claim(subscription_id text, worker text, now_ms bigint DEFAULT NULL::bigint) RETURNS json
    LANGUAGE c SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS 'MODULE_PATHNAME', 'stream_subscription_claim';

COMMENT ON FUNCTION sandbox_persist.stream_subscription_claim(subscription_id text, worker text, now_ms bigint) IS 'Claim a pull-wake subscription''s wake for a worker (docs/contract/streams.md §7): json {outcome: claimed, wake_id, generation, token, streams, lease_ttl_ms}, {outcome: alreadyClaimed, current_holder, generation} or {outcome: noPendingWork}; 22023 for a webhook subscription, SP709 when absent.';

-- function stream_subscription_ack(text, text, json, bigint)
CREATE FUNCTION sandbox_persist.stream_subscription_ack(subscription_id text, token text, request json, now_ms bigint DEFAULT NULL::bigint) RETURNS json
    LANGUAGE c SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS 'MODULE_PATHNAME', 'stream_subscription_ack';

COMMENT ON FUNCTION sandbox_persist.stream_subscription_ack(subscription_id text, token text, request json, now_ms bigint) IS 'A webhook callback or a pull-wake ack (docs/contract/streams.md §7): request {wake_id, generation, acks?: [{stream, offset}], done?}; moves the acknowledged offsets and the lease, and with done ends the wake (and issues the next when work is pending). Returns json {outcome: ok, next_wake}, {outcome: fenced} or {outcome: invalidOffset, message}; SP712 for a wrong token, SP709 when absent.';

-- function stream_subscription_release(text, text, json, bigint)
CREATE FUNCTION sandbox_persist.stream_subscription_release(subscription_id text, token text, request json, now_ms bigint DEFAULT NULL::bigint) RETURNS json
    LANGUAGE c SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS 'MODULE_PATHNAME', 'stream_subscription_release';

COMMENT ON FUNCTION sandbox_persist.stream_subscription_release(subscription_id text, token text, request json, now_ms bigint) IS 'Release a wake without acknowledging (docs/contract/streams.md §7): request {wake_id, generation}; the next wake is issued when work is pending. Returns json {outcome: released} or {outcome: fenced}; SP712 for a wrong token, SP709 when absent.';

-- function stream_subscription_deliveries(integer, bigint)
CREATE FUNCTION sandbox_persist.stream_subscription_deliveries(max_rows integer DEFAULT 16, now_ms bigint DEFAULT NULL::bigint) RETURNS json
    LANGUAGE c SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS 'MODULE_PATHNAME', 'stream_subscription_deliveries';

COMMENT ON FUNCTION sandbox_persist.stream_subscription_deliveries(max_rows integer, now_ms bigint) IS 'For the server that sends webhooks (docs/contract/streams.md §7): expires lapsed leases (issuing the next wake where work is pending), then takes up to max_rows webhook deliveries due now (SKIP LOCKED, so servers share them), each with a fresh callback token. Returns json {deliveries: [{subscription_id, url, wake_id, generation, callback_token, streams}], next_due_at}.';

-- function stream_subscription_delivered(text, text, bigint, json, bigint)
CREATE FUNCTION sandbox_persist.stream_subscription_delivered(subscription_id text, wake_id text, generation bigint, result json, now_ms bigint DEFAULT NULL::bigint) RETURNS json
    LANGUAGE c SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS 'MODULE_PATHNAME', 'stream_subscription_delivered';

COMMENT ON FUNCTION sandbox_persist.stream_subscription_delivered(subscription_id text, wake_id text, generation bigint, result json, now_ms bigint) IS 'What came of a webhook delivery (docs/contract/streams.md §7): result {ok, done}; done acknowledges the wake''s snapshot and ends it, ok alone starts the callback lease, a failure schedules a retry (1 s doubling to 60 s, 20 % jitter). Returns json {outcome: acked|awaitingCallback|retry|fenced, next_wake?}.';

-- trigger event_logs event_log_write_guard
CREATE TRIGGER event_log_write_guard BEFORE INSERT OR UPDATE ON sandbox_persist.event_logs FOR EACH ROW EXECUTE FUNCTION sandbox_persist._thread_write_guard('run');

-- trigger artifacts thread_write_guard
CREATE TRIGGER thread_write_guard BEFORE INSERT OR DELETE OR UPDATE ON sandbox_persist.artifacts FOR EACH ROW EXECUTE FUNCTION sandbox_persist._thread_write_guard();

-- trigger checkpoint_threads thread_write_guard
CREATE TRIGGER thread_write_guard BEFORE INSERT OR UPDATE ON sandbox_persist.checkpoint_threads FOR EACH ROW EXECUTE FUNCTION sandbox_persist._thread_write_guard();

-- trigger generation_runs thread_write_guard
CREATE TRIGGER thread_write_guard BEFORE INSERT OR DELETE OR UPDATE ON sandbox_persist.generation_runs FOR EACH ROW EXECUTE FUNCTION sandbox_persist._thread_write_guard();

-- trigger interrupts thread_write_guard
CREATE TRIGGER thread_write_guard BEFORE INSERT OR DELETE OR UPDATE ON sandbox_persist.interrupts FOR EACH ROW EXECUTE FUNCTION sandbox_persist._thread_write_guard();

-- trigger messages thread_write_guard
CREATE TRIGGER thread_write_guard BEFORE INSERT OR DELETE OR UPDATE ON sandbox_persist.messages FOR EACH ROW EXECUTE FUNCTION sandbox_persist._thread_write_guard();

-- trigger runs thread_write_guard
CREATE TRIGGER thread_write_guard BEFORE INSERT OR UPDATE ON sandbox_persist.runs FOR EACH ROW EXECUTE FUNCTION sandbox_persist._thread_write_guard();

-- trigger artifacts blob_gc_artifact_deleted
CREATE TRIGGER blob_gc_artifact_deleted AFTER DELETE ON sandbox_persist.artifacts REFERENCING OLD TABLE AS gone FOR EACH STATEMENT EXECUTE FUNCTION sandbox_persist._blob_gc_enqueue();

-- trigger artifacts blob_gc_artifact_updated
CREATE TRIGGER blob_gc_artifact_updated AFTER UPDATE ON sandbox_persist.artifacts REFERENCING OLD TABLE AS gone FOR EACH STATEMENT EXECUTE FUNCTION sandbox_persist._blob_gc_enqueue();

-- trigger blob_chunks row_count_deleted
CREATE TRIGGER row_count_deleted AFTER DELETE ON sandbox_persist.blob_chunks FOR EACH ROW EXECUTE FUNCTION sandbox_persist._row_count_trigger('blob_stored_bytes#data');

-- trigger blob_chunks row_count_inserted
CREATE TRIGGER row_count_inserted AFTER INSERT ON sandbox_persist.blob_chunks FOR EACH ROW EXECUTE FUNCTION sandbox_persist._row_count_trigger('blob_stored_bytes#data');

-- trigger blob_chunks row_count_updated
CREATE TRIGGER row_count_updated AFTER UPDATE OF data ON sandbox_persist.blob_chunks FOR EACH ROW WHEN ((pg_column_size(old.data) <> pg_column_size(new.data))) EXECUTE FUNCTION sandbox_persist._row_count_trigger('blob_stored_bytes#data');

-- trigger blobs row_count_deleted
CREATE TRIGGER row_count_deleted AFTER DELETE ON sandbox_persist.blobs FOR EACH ROW EXECUTE FUNCTION sandbox_persist._row_count_trigger('blobs', 'blob_raw_bytes+size', 'blob_stored_bytes#inline_data');

-- trigger blobs row_count_inserted
CREATE TRIGGER row_count_inserted AFTER INSERT ON sandbox_persist.blobs FOR EACH ROW EXECUTE FUNCTION sandbox_persist._row_count_trigger('blobs', 'blob_raw_bytes+size', 'blob_stored_bytes#inline_data');

-- trigger blobs row_count_updated
CREATE TRIGGER row_count_updated AFTER UPDATE OF size, inline_data ON sandbox_persist.blobs FOR EACH ROW WHEN (((old.size <> new.size) OR (pg_column_size(old.inline_data) IS DISTINCT FROM pg_column_size(new.inline_data)))) EXECUTE FUNCTION sandbox_persist._row_count_trigger('blobs', 'blob_raw_bytes+size', 'blob_stored_bytes#inline_data');

-- trigger checkpoint_blob_refs blob_gc_reference_deleted
CREATE TRIGGER blob_gc_reference_deleted AFTER DELETE ON sandbox_persist.checkpoint_blob_refs REFERENCING OLD TABLE AS gone FOR EACH STATEMENT EXECUTE FUNCTION sandbox_persist._blob_gc_enqueue();

-- trigger runs row_count_deleted
CREATE TRIGGER row_count_deleted AFTER DELETE ON sandbox_persist.runs FOR EACH ROW EXECUTE FUNCTION sandbox_persist._row_count_trigger('runs.{status}');

-- trigger runs row_count_inserted
CREATE TRIGGER row_count_inserted AFTER INSERT ON sandbox_persist.runs FOR EACH ROW EXECUTE FUNCTION sandbox_persist._row_count_trigger('runs.{status}');

-- trigger runs row_count_updated
CREATE TRIGGER row_count_updated AFTER UPDATE OF status ON sandbox_persist.runs FOR EACH ROW WHEN ((old.status <> new.status)) EXECUTE FUNCTION sandbox_persist._row_count_trigger('runs.{status}');

-- foreign key checkpoint_blob_refs checkpoint_blob_refs_checkpoint_id_fkey
ALTER TABLE ONLY sandbox_persist.checkpoint_blob_refs
    ADD CONSTRAINT checkpoint_blob_refs_checkpoint_id_fkey FOREIGN KEY (checkpoint_id) REFERENCES sandbox_persist.checkpoints(checkpoint_id) ON DELETE CASCADE;

------------------------------------------------------------------------------
-- pg_dump keeps every table's rows and every sequence's position (explicit
-- and identity sequences), in this order.
------------------------------------------------------------------------------
SELECT pg_catalog.pg_extension_config_dump('interrupts', '');
SELECT pg_catalog.pg_extension_config_dump('metadata', '');
SELECT pg_catalog.pg_extension_config_dump('generation_runs', '');
SELECT pg_catalog.pg_extension_config_dump('artifacts', '');
SELECT pg_catalog.pg_extension_config_dump('blob_versions', '');
SELECT pg_catalog.pg_extension_config_dump('blob_etags', '');
SELECT pg_catalog.pg_extension_config_dump('blobs', '');
SELECT pg_catalog.pg_extension_config_dump('blob_chunks', '');
SELECT pg_catalog.pg_extension_config_dump('blob_uploads', '');
SELECT pg_catalog.pg_extension_config_dump('lock_fences', '');
SELECT pg_catalog.pg_extension_config_dump('locks', '');
SELECT pg_catalog.pg_extension_config_dump('event_logs', '');
SELECT pg_catalog.pg_extension_config_dump('event_log_entries', '');
SELECT pg_catalog.pg_extension_config_dump('event_log_producers', '');
SELECT pg_catalog.pg_extension_config_dump('attention', '');
SELECT pg_catalog.pg_extension_config_dump('reaper_heartbeats', '');
SELECT pg_catalog.pg_extension_config_dump('maintenance_state', '');
SELECT pg_catalog.pg_extension_config_dump('instances', '');
SELECT pg_catalog.pg_extension_config_dump('runs', '');
SELECT pg_catalog.pg_extension_config_dump('messages', '');
SELECT pg_catalog.pg_extension_config_dump('checkpoint_threads', '');
SELECT pg_catalog.pg_extension_config_dump('checkpoints', '');
SELECT pg_catalog.pg_extension_config_dump('checkpoint_blob_refs', '');
SELECT pg_catalog.pg_extension_config_dump('event_logs_log_id_seq', '');
SELECT pg_catalog.pg_extension_config_dump('generation_runs_seq_seq', '');
SELECT pg_catalog.pg_extension_config_dump('interrupts_seq_seq', '');
SELECT pg_catalog.pg_extension_config_dump('runs_seq_seq', '');
SELECT pg_catalog.pg_extension_config_dump('conversation_blocks', '');
SELECT pg_catalog.pg_extension_config_dump('conversation_garbage', '');
SELECT pg_catalog.pg_extension_config_dump('thread_moves', '');
SELECT pg_catalog.pg_extension_config_dump('maintenance_schedule', '');
SELECT pg_catalog.pg_extension_config_dump('lease_takeovers', '');
SELECT pg_catalog.pg_extension_config_dump('blob_gc_queue', '');
SELECT pg_catalog.pg_extension_config_dump('streams', '');
SELECT pg_catalog.pg_extension_config_dump('stream_entries', '');
SELECT pg_catalog.pg_extension_config_dump('stream_producers', '');
SELECT pg_catalog.pg_extension_config_dump('streams_stream_id_seq', '');
-- row_counts is emptied by _reset_for_tests() but dumps no row: the triggers
-- rebuild it while a restore loads the counted tables.
SELECT pg_catalog.pg_extension_config_dump('row_counts', 'WHERE false');

-- Owners, privileges, initial privileges, pinned search_paths: the hardening
-- routine, exactly as every upgrade script ends.
SELECT sandbox_persist._harden();
