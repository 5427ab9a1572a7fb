-- sandbox_persist router: the hand-written routes (route "custom" in
-- router/routes.tsv), for methods whose shard cannot be read off one argument.
--
-- Owns: checkpoint_get_parts (a set of rows from the shard that holds the
-- checkpoint), fork (one shard, or the cross-shard orchestration), the interrupt
-- batch, artifact_save, lock_renew_many, the blob store (content-addressed keys
-- are stored on every shard), the durable stream writes (fork placement, the
-- repeated notifications), reaper_heartbeat, _reset_for_tests and the
-- router's grant_app_role. Locking rule: none on the router (except a
-- per-path advisory lock serialising stream creates, see stream_create); each shard call is
-- its own transaction there, so a method that touches several shards is not
-- atomic across them (each one says what a failure half-way leaves).
-- Each public function is generated (router/generate.sql) and calls its
-- _custom_* function here. The _on_* functions run one statement on the partition given as their first
-- argument (PL/Proxy "RUN ON argument" takes it as the hash; a partition number
-- below the shard count is its own partition).

-- The partition a hash value selects.
CREATE OR REPLACE FUNCTION sandbox_persist._partition(hash integer) RETURNS integer
LANGUAGE sql STABLE AS $$
    SELECT $1 & (sandbox_persist._shard_count() - 1)
$$;

-- ---------------------------------------------------------------- checkpoint reads

-- checkpoint_get_parts on every shard at once: only the one holding the
-- checkpoint has rows, and PL/Proxy passes a shard's rows on in their order.
CREATE OR REPLACE FUNCTION sandbox_persist._all_checkpoint_get_parts(checkpoint_id text)
RETURNS SETOF json LANGUAGE plproxy AS $p$
    CLUSTER 'sandbox_persist_shards';
    RUN ON ALL;
    SELECT sandbox_persist.checkpoint_get_parts(checkpoint_id) AS _all_checkpoint_get_parts;
$p$;

-- get in parts: ids do not name their thread, so fan out as checkpoint_get does.
CREATE OR REPLACE FUNCTION sandbox_persist._custom_checkpoint_get_parts(checkpoint_id text)
RETURNS SETOF json LANGUAGE sql AS $$
    SELECT sandbox_persist._all_checkpoint_get_parts(checkpoint_id)
$$;

-- ---------------------------------------------------------------- fork

-- The local fork on the destination's shard (source and destination share it).
CREATE OR REPLACE FUNCTION sandbox_persist._one_checkpoint_fork_from_checkpoint(input json, now_ms bigint)
RETURNS json LANGUAGE plproxy AS $p$
    CLUSTER 'sandbox_persist_shards';
    RUN ON sandbox_persist._shard_of_fork(input);
    TARGET sandbox_persist.checkpoint_fork_from_checkpoint;
$p$;

-- Stub of the cross-shard fork; router/cross_shard.sql replaces it when present.
CREATE OR REPLACE FUNCTION sandbox_persist._fork_across_shards(input json, now_ms bigint) RETURNS json
LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'cross-shard fork not installed'
        USING ERRCODE = '0A000',
              DETAIL = 'The source and destination threads live on different shards and router/cross_shard.sql is not installed.';
END
$$;

-- forkFromCheckpoint: on the shared shard when both threads live there (every
-- contract error then comes from the shard's own fork), else across shards.
-- An unreadable thread id takes the local path so the shard reports it.
CREATE OR REPLACE FUNCTION sandbox_persist._custom_checkpoint_fork_from_checkpoint(input json, now_ms bigint DEFAULT NULL::bigint)
RETURNS json LANGUAGE plpgsql AS $$
DECLARE
    src text := sandbox_persist._json_text(input, 'sourceThreadId');
    dst text := sandbox_persist._json_text(input, 'destinationThreadId');
BEGIN
    IF src IS NULL OR dst IS NULL
       OR sandbox_persist._partition(sandbox_persist._shard_of_thread(src))
          = sandbox_persist._partition(sandbox_persist._shard_of_thread(dst)) THEN
        RETURN sandbox_persist._one_checkpoint_fork_from_checkpoint(input, now_ms);
    END IF;
    RETURN sandbox_persist._fork_across_shards(input, now_ms);
END
$$;

-- ---------------------------------------------------------------- interrupts

-- The ids of a list that exist on one partition.
CREATE OR REPLACE FUNCTION sandbox_persist._on_interrupt_ids(part integer, ids text[]) RETURNS SETOF text
LANGUAGE plproxy AS $p$
    CLUSTER 'sandbox_persist_shards';
    RUN ON part;
    SELECT u.i AS _on_interrupt_ids FROM pg_catalog.unnest(ids) AS u(i)
    WHERE sandbox_persist.interrupt_get(u.i) IS NOT NULL;
$p$;

CREATE OR REPLACE FUNCTION sandbox_persist._on_interrupt_commit_batch(part integer, entries json, now_ms bigint)
RETURNS SETOF integer LANGUAGE plproxy AS $p$
    CLUSTER 'sandbox_persist_shards';
    RUN ON part;
    SELECT 1 AS _on_interrupt_commit_batch FROM sandbox_persist.interrupt_commit_batch(entries, now_ms) AS v;
$p$;

-- commitBatch is all or nothing, so it runs on one shard: the one holding the
-- batch's interrupts (a batch answers one run's interrupts, which live with the
-- run's thread). Ids no shard knows are left for that shard to refuse (SP102);
-- a batch whose known ids sit on two shards is refused (0A000), changing nothing.
CREATE OR REPLACE FUNCTION sandbox_persist._custom_interrupt_commit_batch(entries json, now_ms bigint DEFAULT NULL::bigint)
RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    ids text[];
    parts integer[] := '{}';
    target integer;
BEGIN
    BEGIN
        -- Only well-formed ids are probed; any other entry (or unreadable
        -- text) is the shard's to refuse.
        IF pg_catalog.json_typeof(entries) = 'array' THEN
            SELECT array_agg(DISTINCT i) INTO ids
            FROM (SELECT sandbox_persist._json_text(e, 'interruptId') AS i
                  FROM pg_catalog.json_array_elements(entries) AS e) s
            WHERE i <> '' AND pg_catalog.octet_length(i) <= 1024;
        END IF;
    EXCEPTION WHEN others THEN
        ids := NULL;
    END;
    IF ids IS NOT NULL THEN
        FOR p IN 0 .. sandbox_persist._shard_count() - 1 LOOP
            IF EXISTS (SELECT 1 FROM sandbox_persist._on_interrupt_ids(p, ids)) THEN
                parts := parts || p;
            END IF;
        END LOOP;
    END IF;
    IF pg_catalog.cardinality(parts) > 1 THEN
        RAISE EXCEPTION 'interrupt batch spans shards'
            USING ERRCODE = '0A000',
                  DETAIL = 'The batch names interrupts stored on different shards; commit each shard''s interrupts in its own batch.';
    END IF;
    target := coalesce(parts[1], sandbox_persist._partition(pg_catalog.hashtext(coalesce(ids[1], ''))));
    PERFORM FROM sandbox_persist._on_interrupt_commit_batch(target, entries, now_ms);
END
$$;

-- ---------------------------------------------------------------- artifacts

CREATE OR REPLACE FUNCTION sandbox_persist._on_artifact_save(part integer, record json)
RETURNS SETOF integer LANGUAGE plproxy AS $p$
    CLUSTER 'sandbox_persist_shards';
    RUN ON part;
    SELECT 1 AS _on_artifact_save FROM sandbox_persist.artifact_save(record) AS v;
$p$;

CREATE OR REPLACE FUNCTION sandbox_persist._on_artifact_delete(part integer, artifact_id text)
RETURNS boolean LANGUAGE plproxy AS $p$
    CLUSTER 'sandbox_persist_shards';
    RUN ON part;
    SELECT sandbox_persist.artifact_delete(artifact_id) AS _on_artifact_delete;
$p$;

-- save: a full replace on the shard of the record's thread, then the same id
-- removed from every other shard (a save under another thread moves the
-- record). Not atomic across shards: a failure after the save leaves an old
-- copy elsewhere, which the next save or delete of the id removes.
CREATE OR REPLACE FUNCTION sandbox_persist._custom_artifact_save(record json) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    target integer := sandbox_persist._partition(sandbox_persist._shard_of_thread_in(record));
    id text;
BEGIN
    PERFORM FROM sandbox_persist._on_artifact_save(target, record);
    id := sandbox_persist._json_text(record, 'artifactId');
    FOR p IN 0 .. sandbox_persist._shard_count() - 1 LOOP
        IF p <> target THEN
            PERFORM sandbox_persist._on_artifact_delete(p, id);
        END IF;
    END LOOP;
END
$$;

-- ---------------------------------------------------------------- locks

CREATE OR REPLACE FUNCTION sandbox_persist._on_lock_renew_many(part integer, leases json, ttl_ms bigint, now_ms bigint)
RETURNS json LANGUAGE plproxy AS $p$
    CLUSTER 'sandbox_persist_shards';
    RUN ON part;
    SELECT sandbox_persist.lock_renew_many(leases, ttl_ms, now_ms) AS _on_lock_renew_many;
$p$;

-- renewMany: one call per shard holding some of the leases (each renews its
-- own in one statement), the answers joined in input order. Input the shards
-- would refuse (not an array, an entry without a string key) goes whole to one
-- shard, which refuses it.
CREATE OR REPLACE FUNCTION sandbox_persist._custom_lock_renew_many(leases json, ttl_ms bigint, now_ms bigint DEFAULT NULL::bigint)
RETURNS json LANGUAGE plpgsql AS $$
DECLARE
    answers json[] := '{}';
    g record;
    result text;
BEGIN
    -- Unreadable text (a lone surrogate makes the json operators fail) is
    -- the shard's to refuse, like any other bad input.
    IF pg_catalog.strpos(leases::text, '\u') > 0
       OR pg_catalog.json_typeof(leases) IS DISTINCT FROM 'array'
       OR pg_catalog.json_array_length(leases) = 0
       OR EXISTS (SELECT 1 FROM pg_catalog.json_array_elements(leases) AS e
                  WHERE pg_catalog.json_typeof(e) IS DISTINCT FROM 'object'
                     OR pg_catalog.json_typeof(e -> 'key') IS DISTINCT FROM 'string') THEN
        RETURN sandbox_persist._on_lock_renew_many(0, leases, ttl_ms, now_ms);
    END IF;
    FOR g IN
        SELECT s.part, '[' || string_agg(s.elem, ',' ORDER BY s.ord) || ']' AS sub
        FROM (SELECT x.e::text AS elem, x.o AS ord,
                     sandbox_persist._partition(sandbox_persist._shard_of_lock(sandbox_persist._json_text(x.e, 'key'))) AS part
              FROM pg_catalog.json_array_elements(leases) WITH ORDINALITY AS x(e, o)) AS s
        GROUP BY s.part ORDER BY s.part
    LOOP
        answers := answers || sandbox_persist._on_lock_renew_many(g.part, g.sub::json, ttl_ms, now_ms);
    END LOOP;
    -- Each shard answers in its input order; the joined answer follows the
    -- caller's order (a key's first position).
    WITH inp AS (
        SELECT sandbox_persist._json_text(x.e, 'key') COLLATE "C" AS key, min(x.o) AS first
        FROM pg_catalog.json_array_elements(leases) WITH ORDINALITY AS x(e, o) GROUP BY 1),
    ans AS (
        SELECT 'renewed' AS kind, (r.e ->> 'key') COLLATE "C" AS key, r.e::text AS elem, a.i, r.o
        FROM pg_catalog.unnest(answers) WITH ORDINALITY AS a(j, i),
             pg_catalog.json_array_elements(a.j -> 'renewed') WITH ORDINALITY AS r(e, o)
        UNION ALL
        SELECT 'lost', (r.e #>> '{}') COLLATE "C", r.e::text, a.i, r.o
        FROM pg_catalog.unnest(answers) WITH ORDINALITY AS a(j, i),
             pg_catalog.json_array_elements(a.j -> 'lost') WITH ORDINALITY AS r(e, o))
    SELECT '{"renewed":[' || coalesce(string_agg(ans.elem, ',' ORDER BY inp.first, ans.i, ans.o) FILTER (WHERE ans.kind = 'renewed'), '')
           || '],"lost":[' || coalesce(string_agg(ans.elem, ',' ORDER BY inp.first, ans.i, ans.o) FILTER (WHERE ans.kind = 'lost'), '')
           || ']}'
    INTO result
    FROM ans JOIN inp USING (key);
    RETURN coalesce(result, '{"renewed":[],"lost":[]}')::json;
END
$$;

-- ---------------------------------------------------------------- blobs
-- A plain key lives on the shard of its hash. A content-addressed key
-- (sandbox-files|sandbox-artifacts/sha256/<hex>) is written to every shard:
-- the router cannot tell which threads will reference it, and each shard's
-- reference counts and GC must see a local copy (content addressing makes the
-- copies identical; a shard whose threads never reference it collects its copy
-- after blob_gc_grace). Reads start at the key's home shard (its hash) and go
-- on to the others, so a copy kept by its references anywhere is found.

CREATE OR REPLACE FUNCTION sandbox_persist._on_blob_put(part integer, blob_key text, body bytea, options json, now_ms bigint)
RETURNS json LANGUAGE plproxy AS $p$
    CLUSTER 'sandbox_persist_shards';
    RUN ON part;
    SELECT sandbox_persist.blob_put(blob_key, body, options, now_ms) AS _on_blob_put;
$p$;

CREATE OR REPLACE FUNCTION sandbox_persist._all_blob_put(blob_key text, body bytea, options json, now_ms bigint)
RETURNS SETOF json LANGUAGE plproxy AS $p$
    CLUSTER 'sandbox_persist_shards';
    RUN ON ALL;
    SELECT sandbox_persist.blob_put(blob_key, body, options, now_ms) AS _all_blob_put;
$p$;

CREATE OR REPLACE FUNCTION sandbox_persist._on_blob_get(part integer, blob_key text, range_offset bigint, range_length bigint)
RETURNS TABLE(record json, body bytea) LANGUAGE plproxy AS $p$
    CLUSTER 'sandbox_persist_shards';
    RUN ON part;
    SELECT g.record, g.body FROM sandbox_persist.blob_get(blob_key, range_offset, range_length) AS g;
$p$;

CREATE OR REPLACE FUNCTION sandbox_persist._on_blob_head(part integer, blob_key text, now_ms bigint)
RETURNS json LANGUAGE plproxy AS $p$
    CLUSTER 'sandbox_persist_shards';
    RUN ON part;
    SELECT sandbox_persist.blob_head(blob_key, now_ms) AS _on_blob_head;
$p$;

CREATE OR REPLACE FUNCTION sandbox_persist._all_blob_delete(blob_key text)
RETURNS SETOF boolean LANGUAGE plproxy AS $p$
    CLUSTER 'sandbox_persist_shards';
    RUN ON ALL;
    SELECT sandbox_persist.blob_delete(blob_key) AS _all_blob_delete;
$p$;

CREATE OR REPLACE FUNCTION sandbox_persist._on_blob_delete(part integer, blob_key text)
RETURNS boolean LANGUAGE plproxy AS $p$
    CLUSTER 'sandbox_persist_shards';
    RUN ON part;
    SELECT sandbox_persist.blob_delete(blob_key) AS _on_blob_delete;
$p$;

CREATE OR REPLACE FUNCTION sandbox_persist._all_blob_list(prefix text, list_cursor text, page_limit integer)
RETURNS SETOF json LANGUAGE plproxy AS $p$
    CLUSTER 'sandbox_persist_shards';
    RUN ON ALL;
    SELECT sandbox_persist.blob_list(prefix, list_cursor, page_limit) AS _all_blob_list;
$p$;

-- The partitions to read a key from, its home first.
CREATE OR REPLACE FUNCTION sandbox_persist._blob_read_order(blob_key text) RETURNS SETOF integer
LANGUAGE sql STABLE AS $$
    SELECT p FROM pg_catalog.generate_series(0, sandbox_persist._shard_count() - 1) AS p
    WHERE sandbox_persist._blob_is_addressed($1)
       OR p = sandbox_persist._partition(sandbox_persist._shard_of_key($1))
    ORDER BY p <> sandbox_persist._partition(sandbox_persist._shard_of_key($1)), p
$$;

-- put: the home shard, or every shard (in parallel) for a content-addressed
-- key; the answer is the home shard's. A content-addressed put that fails on
-- one shard (SP301 fails on all) may leave copies on others, which are
-- unreferenced and collected.
CREATE OR REPLACE FUNCTION sandbox_persist._custom_blob_put(blob_key text, body bytea, options json DEFAULT NULL::json, now_ms bigint DEFAULT NULL::bigint)
RETURNS json LANGUAGE plpgsql AS $$
DECLARE
    home integer := sandbox_persist._partition(sandbox_persist._shard_of_key(blob_key));
BEGIN
    IF sandbox_persist._blob_is_addressed(blob_key) THEN
        -- The records differ only in etag and times; return one of them.
        RETURN (SELECT r FROM sandbox_persist._all_blob_put(blob_key, body, options, now_ms) AS r LIMIT 1);
    END IF;
    RETURN sandbox_persist._on_blob_put(home, blob_key, body, options, now_ms);
END
$$;

-- get: the first shard in read order that has the key.
CREATE OR REPLACE FUNCTION sandbox_persist._custom_blob_get(blob_key text, range_offset bigint DEFAULT NULL::bigint, range_length bigint DEFAULT NULL::bigint)
RETURNS TABLE(record json, body bytea) LANGUAGE plpgsql AS $$
DECLARE
    p integer;
BEGIN
    FOR p IN SELECT * FROM sandbox_persist._blob_read_order(blob_key) LOOP
        RETURN QUERY SELECT g.record, g.body FROM sandbox_persist._on_blob_get(p, blob_key, range_offset, range_length) AS g;
        IF FOUND THEN
            RETURN;
        END IF;
    END LOOP;
END
$$;

-- head: the first shard in read order that has the key (it refreshes that copy's GC time).
CREATE OR REPLACE FUNCTION sandbox_persist._custom_blob_head(blob_key text, now_ms bigint DEFAULT NULL::bigint)
RETURNS json LANGUAGE plpgsql AS $$
DECLARE
    p integer;
    r json;
BEGIN
    FOR p IN SELECT * FROM sandbox_persist._blob_read_order(blob_key) LOOP
        r := sandbox_persist._on_blob_head(p, blob_key, now_ms);
        IF r IS NOT NULL THEN
            RETURN r;
        END IF;
    END LOOP;
    RETURN NULL;
END
$$;

-- delete: the home shard, or every copy of a content-addressed key.
CREATE OR REPLACE FUNCTION sandbox_persist._custom_blob_delete(blob_key text) RETURNS boolean
LANGUAGE plpgsql AS $$
BEGIN
    IF sandbox_persist._blob_is_addressed(blob_key) THEN
        RETURN (SELECT coalesce(bool_or(r), false) FROM sandbox_persist._all_blob_delete(blob_key) AS r);
    END IF;
    RETURN sandbox_persist._on_blob_delete(sandbox_persist._partition(sandbox_persist._shard_of_key(blob_key)), blob_key);
END
$$;

-- list: every shard's page after the cursor, merged by key bytes with one
-- record per key (copies of a content-addressed key: the first shard's), then
-- cut to the limit. The page is truncated when keys were cut or a shard had
-- more; its cursor is its last key, as on one server.
CREATE OR REPLACE FUNCTION sandbox_persist._custom_blob_list(prefix text DEFAULT NULL::text, list_cursor text DEFAULT NULL::text, page_limit integer DEFAULT NULL::integer)
RETURNS json LANGUAGE plpgsql AS $$
DECLARE
    pages json[];
    objects text;
    last_key json;
    shown integer;
    total integer;
    more boolean;
BEGIN
    SELECT array_agg(r) INTO pages FROM sandbox_persist._all_blob_list(prefix, list_cursor, page_limit) AS r;
    SELECT coalesce(bool_or((pg ->> 'truncated')::boolean), false) INTO more FROM pg_catalog.unnest(pages) AS pg;
    WITH items AS (
        SELECT DISTINCT ON ((e ->> 'key') COLLATE "C") (e ->> 'key') COLLATE "C" AS k, e -> 'key' AS kj, e::text AS elem
        FROM pg_catalog.unnest(pages) WITH ORDINALITY AS a(pg, i),
             pg_catalog.json_array_elements(a.pg -> 'objects') WITH ORDINALITY AS x(e, o)
        ORDER BY (e ->> 'key') COLLATE "C", a.i),
    counted AS (SELECT count(*)::integer AS n FROM items),
    cut AS (SELECT * FROM items ORDER BY k LIMIT page_limit)
    SELECT (SELECT n FROM counted), count(*)::integer,
           coalesce(string_agg(elem, ',' ORDER BY k), ''),
           (array_agg(kj ORDER BY k DESC))[1]
    INTO total, shown, objects, last_key
    FROM cut;
    IF shown < total OR (more AND shown > 0) THEN
        RETURN ('{"objects":[' || objects || '],"truncated":true,"cursor":' || last_key::text || '}')::json;
    END IF;
    RETURN ('{"objects":[' || objects || '],"truncated":false}')::json;
END
$$;

-- Uploads: begun on the key's home shard, whose upload id (a UUID) goes to
-- the client unchanged; the router remembers the partition per id. An id it
-- does not know goes to partition 0, which answers SP302 as for any unknown
-- upload.
CREATE OR REPLACE FUNCTION sandbox_persist._on_blob_upload_begin(part integer, blob_key text, options json, now_ms bigint)
RETURNS text LANGUAGE plproxy AS $p$
    CLUSTER 'sandbox_persist_shards';
    RUN ON part;
    SELECT sandbox_persist.blob_upload_begin(blob_key, options, now_ms) AS _on_blob_upload_begin;
$p$;

CREATE OR REPLACE FUNCTION sandbox_persist._on_blob_upload_append(part integer, upload_id text, at_offset bigint, bytes bytea, now_ms bigint)
RETURNS json LANGUAGE plproxy AS $p$
    CLUSTER 'sandbox_persist_shards';
    RUN ON part;
    SELECT sandbox_persist.blob_upload_append(upload_id, at_offset, bytes, now_ms) AS _on_blob_upload_append;
$p$;

CREATE OR REPLACE FUNCTION sandbox_persist._on_blob_upload_commit(part integer, upload_id text, now_ms bigint)
RETURNS json LANGUAGE plproxy AS $p$
    CLUSTER 'sandbox_persist_shards';
    RUN ON part;
    SELECT sandbox_persist.blob_upload_commit(upload_id, now_ms) AS _on_blob_upload_commit;
$p$;

CREATE OR REPLACE FUNCTION sandbox_persist._on_blob_upload_abort(part integer, upload_id text)
RETURNS boolean LANGUAGE plproxy AS $p$
    CLUSTER 'sandbox_persist_shards';
    RUN ON part;
    SELECT sandbox_persist.blob_upload_abort(upload_id) AS _on_blob_upload_abort;
$p$;

-- The partition of an upload id.
CREATE OR REPLACE FUNCTION sandbox_persist._upload_part(upload_id text) RETURNS integer
LANGUAGE sql STABLE AS $$
    SELECT coalesce((SELECT u.shard FROM sandbox_persist.upload_placement u WHERE u.upload_id = $1), 0)
$$;

CREATE OR REPLACE FUNCTION sandbox_persist._custom_blob_upload_begin(blob_key text, options json DEFAULT NULL::json, now_ms bigint DEFAULT NULL::bigint)
RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    home integer := sandbox_persist._partition(sandbox_persist._shard_of_key(blob_key));
    id text := sandbox_persist._on_blob_upload_begin(home, blob_key, options, now_ms);
BEGIN
    INSERT INTO sandbox_persist.upload_placement (upload_id, shard) VALUES (id, home)
    ON CONFLICT (upload_id) DO UPDATE SET shard = EXCLUDED.shard;
    RETURN id;
END
$$;

CREATE OR REPLACE FUNCTION sandbox_persist._custom_blob_upload_append(upload_id text, at_offset bigint, bytes bytea, now_ms bigint DEFAULT NULL::bigint)
RETURNS json LANGUAGE sql AS $$
    SELECT sandbox_persist._on_blob_upload_append(sandbox_persist._upload_part($1), $1, $2, $3, $4)
$$;

CREATE OR REPLACE FUNCTION sandbox_persist._custom_blob_upload_abort(upload_id text) RETURNS boolean
LANGUAGE plpgsql AS $$
DECLARE
    r boolean := sandbox_persist._on_blob_upload_abort(sandbox_persist._upload_part(upload_id), upload_id);
BEGIN
    DELETE FROM sandbox_persist.upload_placement u WHERE u.upload_id = $1;
    RETURN r;
END
$$;

-- commit: publish on the home shard; a content-addressed key is then copied
-- to every other shard (whole: bounded by blob_max_read) with its type and
-- metadata. A failed copy leaves the key on fewer shards; a later put of the
-- same content completes it.
CREATE OR REPLACE FUNCTION sandbox_persist._custom_blob_upload_commit(upload_id text, now_ms bigint DEFAULT NULL::bigint)
RETURNS json LANGUAGE plpgsql AS $$
DECLARE
    part integer := sandbox_persist._upload_part(upload_id);
    rec json;
    key text;
    content bytea;
    opts json;
BEGIN
    rec := sandbox_persist._on_blob_upload_commit(part, upload_id, now_ms);
    DELETE FROM sandbox_persist.upload_placement u WHERE u.upload_id = $1;
    key := rec ->> 'key';
    IF sandbox_persist._blob_is_addressed(key) AND sandbox_persist._shard_count() > 1 THEN
        SELECT g.body INTO content FROM sandbox_persist._on_blob_get(part, key, NULL, NULL) AS g;
        opts := pg_catalog.json_strip_nulls(pg_catalog.json_build_object(
            'contentType', rec -> 'contentType', 'customMetadata', rec -> 'customMetadata'));
        FOR p IN 0 .. sandbox_persist._shard_count() - 1 LOOP
            IF p <> part THEN
                PERFORM sandbox_persist._on_blob_put(p, key, content, opts, now_ms);
            END IF;
        END LOOP;
    END IF;
    RETURN rec;
END
$$;

-- ---------------------------------------------------------------- maintenance, administration

CREATE OR REPLACE FUNCTION sandbox_persist._all_reaper_heartbeat(replica text, summary json, now_ms bigint)
RETURNS SETOF integer LANGUAGE plproxy AS $p$
    CLUSTER 'sandbox_persist_shards';
    RUN ON ALL;
    SELECT 1 AS _all_reaper_heartbeat FROM sandbox_persist.reaper_heartbeat(replica, summary, now_ms) AS v;
$p$;

-- The reaper's heartbeat is recorded on every shard: each shard's watchdog
-- judges its own detached runs against it.
CREATE OR REPLACE FUNCTION sandbox_persist._custom_reaper_heartbeat(replica text, summary json DEFAULT NULL::json, now_ms bigint DEFAULT NULL::bigint)
RETURNS void LANGUAGE sql AS $$
    SELECT FROM sandbox_persist._all_reaper_heartbeat(replica, summary, now_ms)
$$;

CREATE OR REPLACE FUNCTION sandbox_persist._all__reset_for_tests()
RETURNS SETOF integer LANGUAGE plproxy AS $p$
    CLUSTER 'sandbox_persist_shards';
    RUN ON ALL;
    SELECT 1 AS _all__reset_for_tests FROM sandbox_persist._reset_for_tests() AS v;
$p$;

-- Test reset: every shard (each refuses with SP902 unless allowed), then the
-- router's placement overrides and run cache, which describe the shards' rows.
CREATE OR REPLACE FUNCTION sandbox_persist._custom__reset_for_tests() RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM FROM sandbox_persist._all__reset_for_tests();
    TRUNCATE sandbox_persist.thread_placement, sandbox_persist.run_thread_cache,
        sandbox_persist.upload_placement, sandbox_persist.stream_placement;
END
$$;

-- The router's side of an application role: its functions, and the placement
-- and cache tables they read and fill. The shards grant their own (the role
-- named in the cluster's connection strings, through grant_app_role there).
CREATE OR REPLACE FUNCTION sandbox_persist._custom_grant_app_role(app_role regrole) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    IF app_role IS NULL THEN
        RAISE EXCEPTION 'app_role must not be null' USING ERRCODE = '22004',
            DETAIL = 'Name the role to grant the router''s functions to.';
    END IF;
    EXECUTE format('GRANT USAGE ON SCHEMA sandbox_persist TO %s', app_role);
    EXECUTE format('GRANT EXECUTE ON ALL ROUTINES IN SCHEMA sandbox_persist TO %s', app_role);
    EXECUTE format('GRANT SELECT ON sandbox_persist.thread_placement TO %s', app_role);
    EXECUTE format('GRANT SELECT, INSERT ON sandbox_persist.run_thread_cache TO %s', app_role);
    EXECUTE format('GRANT SELECT, INSERT, UPDATE, DELETE ON sandbox_persist.upload_placement TO %s', app_role);
    EXECUTE format('GRANT SELECT, INSERT, UPDATE ON sandbox_persist.stream_placement TO %s', app_role);
    EXECUTE format('GRANT USAGE ON FOREIGN SERVER sandbox_persist_shards TO %s', app_role);
    -- As in the extension, the administration routines stay the DBA's.
    PERFORM sandbox_persist._revoke_admin_routines(app_role);
END
$$;

-- Withdraw EXECUTE on the router's administration routines (those the
-- extension never grants an application) from a role.
CREATE OR REPLACE FUNCTION sandbox_persist._revoke_admin_routines(app_role regrole) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    fn regprocedure;
BEGIN
    FOR fn IN
        SELECT p.oid::regprocedure FROM pg_catalog.pg_proc p
         WHERE p.pronamespace = 'sandbox_persist'::regnamespace
           AND p.proname IN ('grant_app_role', 'revoke_app_role', 'schedule_maintenance',
                             'unschedule_maintenance', '_reset_for_tests',
                             '_custom_grant_app_role', '_custom_revoke_app_role',
                             '_custom_schedule_maintenance', '_custom_unschedule_maintenance',
                             '_custom__reset_for_tests', '_revoke_admin_routines')
    LOOP
        EXECUTE format('REVOKE EXECUTE ON FUNCTION %s FROM %s', fn, app_role);
    END LOOP;
END
$$;

-- The router's revoke_app_role: withdraw everything grant_app_role gave.
CREATE OR REPLACE FUNCTION sandbox_persist._custom_revoke_app_role(app_role regrole) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    IF app_role IS NULL OR NOT EXISTS (SELECT 1 FROM pg_catalog.pg_roles WHERE oid = app_role) THEN
        RAISE EXCEPTION 'role % does not exist', coalesce(app_role::oid::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = 'revoke_app_role withdraws the grants of an existing role.';
    END IF;
    EXECUTE format('REVOKE EXECUTE ON ALL ROUTINES IN SCHEMA sandbox_persist FROM %s', app_role);
    EXECUTE format('REVOKE ALL ON sandbox_persist.thread_placement, sandbox_persist.run_thread_cache, sandbox_persist.upload_placement, sandbox_persist.stream_placement FROM %s', app_role);
    EXECUTE format('REVOKE USAGE ON FOREIGN SERVER sandbox_persist_shards FROM %s', app_role);
    EXECUTE format('REVOKE USAGE ON SCHEMA sandbox_persist FROM %s', app_role);
END
$$;

-- ---------------------------------------------------------------- creates
-- createOrResume and interrupt create return or keep an existing record
-- whatever thread the input names, so a record that already exists is
-- answered by its own shard; only a new one goes to the input's thread.

-- The thread of a record as each shard sees it (NULL where unknown).
CREATE OR REPLACE FUNCTION sandbox_persist._probe_thread(kind text, record_id text) RETURNS SETOF text
LANGUAGE plproxy AS $p$
    CLUSTER 'sandbox_persist_shards';
    RUN ON ALL;
    SELECT CASE kind
               WHEN 'generation_run' THEN sandbox_persist.generation_run_get(record_id) ->> 'threadId'
               WHEN 'interrupt' THEN sandbox_persist.interrupt_get(record_id) ->> 'threadId'
           END AS _probe_thread;
$p$;

-- The partition that must answer a create: the existing record's, else the
-- input's thread. Ids the shards would refuse are not probed (the shard
-- refuses the create in its own check order).
CREATE OR REPLACE FUNCTION sandbox_persist._create_target(kind text, input json, id_member text) RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
    id text := sandbox_persist._json_text(input, id_member);
    thread text;
BEGIN
    IF id IS NOT NULL AND id <> '' AND pg_catalog.octet_length(id) <= 1024
       AND pg_catalog.strpos(input::text, '\u') = 0
       AND pg_catalog.json_typeof(input -> id_member) = 'string' THEN
        IF kind = 'run' THEN
            RETURN sandbox_persist._partition(sandbox_persist._shard_of_run_or(id, sandbox_persist._json_text(input, 'threadId')));
        END IF;
        SELECT t INTO thread FROM sandbox_persist._probe_thread(kind, id) AS t WHERE t IS NOT NULL LIMIT 1;
    END IF;
    RETURN sandbox_persist._partition(sandbox_persist._shard_of_thread(coalesce(thread, sandbox_persist._json_text(input, 'threadId'))));
END
$$;

-- The shard of a run's thread (cache, else probe), else of the given thread.
CREATE OR REPLACE FUNCTION sandbox_persist._shard_of_run_or(run_id text, thread_id text) RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
    thread text;
BEGIN
    SELECT c.thread_id INTO thread FROM sandbox_persist.run_thread_cache c WHERE c.run_id = $1;
    IF NOT FOUND THEN
        SELECT t INTO thread FROM sandbox_persist._probe_run_thread($1) AS t WHERE t IS NOT NULL LIMIT 1;
    END IF;
    RETURN sandbox_persist._shard_of_thread(coalesce(thread, $2));
END
$$;

CREATE OR REPLACE FUNCTION sandbox_persist._on_run_create_or_resume(part integer, input json) RETURNS json
LANGUAGE plproxy AS $p$
    CLUSTER 'sandbox_persist_shards';
    RUN ON part;
    SELECT sandbox_persist.run_create_or_resume(input) AS _on_run_create_or_resume;
$p$;

-- Creates on the run's shard and remembers the run's thread, so its event
-- log and run-driver lock find it without a fan-out.
CREATE OR REPLACE FUNCTION sandbox_persist._custom_run_create_or_resume(input json) RETURNS json
LANGUAGE plpgsql AS $$
DECLARE
    r json := sandbox_persist._on_run_create_or_resume(sandbox_persist._create_target('run', input, 'runId'), input);
BEGIN
    INSERT INTO sandbox_persist.run_thread_cache (run_id, thread_id)
    VALUES (r ->> 'runId', r ->> 'threadId') ON CONFLICT DO NOTHING;
    RETURN r;
END
$$;

CREATE OR REPLACE FUNCTION sandbox_persist._on_generation_run_create_or_resume(part integer, input json) RETURNS json
LANGUAGE plproxy AS $p$
    CLUSTER 'sandbox_persist_shards';
    RUN ON part;
    SELECT sandbox_persist.generation_run_create_or_resume(input) AS _on_generation_run_create_or_resume;
$p$;

CREATE OR REPLACE FUNCTION sandbox_persist._custom_generation_run_create_or_resume(input json) RETURNS json
LANGUAGE sql AS $$
    SELECT sandbox_persist._on_generation_run_create_or_resume(
        sandbox_persist._create_target('generation_run', input, 'runId'), input)
$$;

CREATE OR REPLACE FUNCTION sandbox_persist._on_interrupt_create(part integer, record json) RETURNS boolean
LANGUAGE plproxy AS $p$
    CLUSTER 'sandbox_persist_shards';
    RUN ON part;
    SELECT sandbox_persist.interrupt_create(record) AS _on_interrupt_create;
$p$;

CREATE OR REPLACE FUNCTION sandbox_persist._custom_interrupt_create(record json) RETURNS boolean
LANGUAGE sql AS $$
    SELECT sandbox_persist._on_interrupt_create(
        sandbox_persist._create_target('interrupt', record, 'interruptId'), record)
$$;

-- ---------------------------------------------------------------- notifications
-- The shards notify their own listeners; a client connected to the router
-- listens on the router. So the router repeats, in its own transaction (sent
-- when the caller commits, after the shard has committed), the notifications
-- a client waits on: a lock release, an event-log append or close, the
-- reaper wake-up, a durable stream's append, close or delete (the streams
-- section below). Maintenance's attention and producer-lost notifications stay
-- on the shards (the adapter's polling fallback covers them).

CREATE OR REPLACE FUNCTION sandbox_persist._on_lock_release(part integer, lock_key text, owner_token text) RETURNS boolean
LANGUAGE plproxy AS $p$
    CLUSTER 'sandbox_persist_shards';
    RUN ON part;
    SELECT sandbox_persist.lock_release(lock_key, owner_token) AS _on_lock_release;
$p$;

CREATE OR REPLACE FUNCTION sandbox_persist._custom_lock_release(lock_key text, owner_token text) RETURNS boolean
LANGUAGE plpgsql AS $$
DECLARE
    r boolean := sandbox_persist._on_lock_release(sandbox_persist._shard_of_lock(lock_key), lock_key, owner_token);
BEGIN
    IF r THEN
        PERFORM pg_catalog.pg_notify('sandbox_persist_lock', pg_catalog.md5(lock_key));
    END IF;
    RETURN r;
END
$$;

-- The append and, in the same statement, the log as the statement's snapshot
-- saw it: before the append, since the read is STABLE. So a new log's first
-- append is announced with 0 (it wakes the readers that have no log id yet),
-- and the tail digest is that of the entry just before the appended ones when
-- the tail is the entry before the first token (another producer's append
-- committed in between otherwise: then the notice carries no entries).
CREATE OR REPLACE FUNCTION sandbox_persist._on_event_log_append(part integer, run_id text, chunks json, options json) RETURNS json
LANGUAGE plproxy AS $p$
    CLUSTER 'sandbox_persist_shards';
    RUN ON part;
    SELECT pg_catalog.json_build_object(
        'r', sandbox_persist.event_log_append(run_id, chunks, options),
        'before', sandbox_persist.event_log_read_verified(run_id, 0, NULL, 0)) AS _on_event_log_append;
$p$;

-- The router repeats the shard's notification (docs/contract/event-log.md
-- §2.1), rebuilt from what it holds: the log id, then, when it fits, the
-- digest before the entries and the entries ({seq, digest, chunk}: the tokens
-- with the chunks' own text). The log id alone when the tail the shard call
-- saw is not the entry before the first token (another producer's append
-- came in between), when the tokens are bare seqs (the append did not ask
-- withDigests), or when the whole would not stay under 7900 bytes. In
-- PL/pgSQL, whose plans are kept: a SQL function is planned on every call.
CREATE OR REPLACE FUNCTION sandbox_persist._custom_event_log_append(run_id text, chunks json, options json DEFAULT NULL::json) RETURNS json
LANGUAGE plpgsql AS $$
DECLARE
    a json := sandbox_persist._on_event_log_append(sandbox_persist._shard_of_run(run_id), run_id, chunks, options);
    before json := a -> 'before';
    notice text := coalesce(before ->> 'logId', '0');
    full_notice text;
BEGIN
    IF pg_catalog.json_array_length(a -> 'r') = 0 THEN
        RETURN a -> 'r';
    END IF;
    IF before ->> 'logId' IS NOT NULL AND pg_catalog.json_typeof(a -> 'r' -> 0) = 'object'
       AND (before ->> 'tail')::bigint = (a -> 'r' -> 0 ->> 'seq')::bigint - 1
       AND pg_catalog.octet_length(chunks::text) < 7900 THEN
        SELECT notice || ' {"prev":"' || (before ->> 'tailDigest') || '","entries":[' ||
               pg_catalog.string_agg(pg_catalog.format('{"seq":%s,"digest":"%s","chunk":%s}',
                   t.v ->> 'seq', t.v ->> 'digest', c.v::text), ',' ORDER BY t.i) || ']}'
          INTO full_notice
          FROM pg_catalog.json_array_elements(a -> 'r') WITH ORDINALITY AS t(v, i)
          JOIN pg_catalog.json_array_elements(chunks) WITH ORDINALITY AS c(v, i) USING (i);
        IF pg_catalog.octet_length(full_notice) < 7900 THEN
            notice := full_notice;
        END IF;
    END IF;
    PERFORM pg_catalog.pg_notify('sandbox_persist_event_log', notice);
    RETURN a -> 'r';
END
$$;

-- appendMany: each part as event_log_append on the router (its shard call and
-- its repeated notification), in input order. Not one transaction: the parts
-- before a refused one stay appended, and a retry of the batch repeats them
-- as idempotent retries when they carry producerId/producerSeq (the adapter's
-- always do). Input the shards would refuse as a whole is refused here first.
CREATE OR REPLACE FUNCTION sandbox_persist._custom_event_log_append_many(appends json) RETURNS json
LANGUAGE plpgsql AS $$
DECLARE
    results json[] := '{}';
    part json;
BEGIN
    IF appends IS NULL OR pg_catalog.json_typeof(appends) <> 'array' THEN
        -- the shards' own refusal (22004 / 22023), from one of them
        RETURN sandbox_persist._on_event_log_append_many(0, appends);
    END IF;
    FOR part IN SELECT e FROM pg_catalog.json_array_elements(appends) AS e LOOP
        IF pg_catalog.json_typeof(part) <> 'object' OR pg_catalog.json_typeof(part -> 'runId') <> 'string' THEN
            RETURN sandbox_persist._on_event_log_append_many(0, appends);
        END IF;
    END LOOP;
    FOR part IN SELECT e FROM pg_catalog.json_array_elements(appends) AS e LOOP
        results := results || sandbox_persist._custom_event_log_append(part ->> 'runId', part -> 'chunks',
            CASE WHEN pg_catalog.json_typeof(part -> 'options') = 'null' THEN NULL ELSE part -> 'options' END);
    END LOOP;
    RETURN pg_catalog.array_to_json(results);
END
$$;

CREATE OR REPLACE FUNCTION sandbox_persist._on_event_log_append_many(part integer, appends json) RETURNS json
LANGUAGE plproxy AS $p$
    CLUSTER 'sandbox_persist_shards';
    RUN ON part;
    SELECT sandbox_persist.event_log_append_many(appends) AS _on_event_log_append_many;
$p$;

CREATE OR REPLACE FUNCTION sandbox_persist._on_event_log_close(part integer, run_id text) RETURNS SETOF integer
LANGUAGE plproxy AS $p$
    CLUSTER 'sandbox_persist_shards';
    RUN ON part;
    SELECT 1 AS _on_event_log_close FROM sandbox_persist.event_log_close(run_id) AS v;
$p$;

CREATE OR REPLACE FUNCTION sandbox_persist._on_event_log_log_id(part integer, run_id text) RETURNS text
LANGUAGE plproxy AS $p$
    CLUSTER 'sandbox_persist_shards';
    RUN ON part;
    SELECT sandbox_persist.event_log_read(run_id, 0, 0) ->> 'logId' AS _on_event_log_log_id;
$p$;

CREATE OR REPLACE FUNCTION sandbox_persist._custom_event_log_close(run_id text) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    part integer := sandbox_persist._shard_of_run(run_id);
BEGIN
    PERFORM FROM sandbox_persist._on_event_log_close(part, run_id);
    PERFORM pg_catalog.pg_notify('sandbox_persist_event_log',
                                 coalesce(sandbox_persist._on_event_log_log_id(part, run_id), '0'));
END
$$;

CREATE OR REPLACE FUNCTION sandbox_persist._all_maintain(max_rows integer, now_ms bigint) RETURNS SETOF json
LANGUAGE plproxy AS $p$
    CLUSTER 'sandbox_persist_shards';
    RUN ON ALL;
    SELECT sandbox_persist.maintain(max_rows, now_ms) AS _all_maintain;
$p$;

CREATE OR REPLACE FUNCTION sandbox_persist._custom_maintain(max_rows integer DEFAULT 1000, now_ms bigint DEFAULT NULL::bigint) RETURNS json
LANGUAGE plpgsql AS $$
DECLARE
    counts json := (SELECT sandbox_persist._merge_counts(array_agg(r)) FROM sandbox_persist._all_maintain(max_rows, now_ms) AS r);
BEGIN
    IF (counts ->> 'detachedRuns')::bigint > 0 THEN
        PERFORM pg_catalog.pg_notify('sandbox_persist_reaper',
            format('{"detached": %s, "due": %s}', counts ->> 'detachedRuns', counts ->> 'dueRuns'));
    END IF;
    RETURN counts;
END
$$;

-- ---------------------------------------------------------------- durable streams
-- A stream lives on the shard of its path (_shard_of_stream in router/base.sql:
-- a stream_placement pin, else hashtext(path); run-logs/<run_id> with the run).
-- A fork reads its source's entries, so it must live on its source's shard:
-- a fork whose path hashes elsewhere is pinned there. Reads and heads are
-- `one` routes; creates pin, appends and deletes repeat the shard's
-- notification on the router (channel sandbox_persist_stream, payload the
-- stream id: the shard notifies on an append that wrote or closed, and on a
-- delete; never on a create). Stream ids are per-shard sequences, so two
-- shards' streams can share an id: a reader is then woken for the other
-- stream, re-reads and finds nothing new; no wake is lost.

CREATE OR REPLACE FUNCTION sandbox_persist._on_stream_create(part integer, path text, content_type text, options json, body bytea, now_ms bigint)
RETURNS json LANGUAGE plproxy AS $p$
    CLUSTER 'sandbox_persist_shards';
    RUN ON part;
    SELECT sandbox_persist.stream_create(path, content_type, options, body, now_ms) AS _on_stream_create;
$p$;

-- Whether a path is taken on a partition: SP701 from its head means free (no
-- stream, or an expired one, which a create replaces); a stream, a
-- soft-deleted one (SP702, its path blocked) or any other answer (bad input,
-- a refused clock) counts as taken, so the create goes there and the shard
-- answers it.
CREATE OR REPLACE FUNCTION sandbox_persist._on_stream_head_taken(part integer, path text, now_ms bigint)
RETURNS json LANGUAGE plproxy AS $p$
    CLUSTER 'sandbox_persist_shards';
    RUN ON part;
    SELECT sandbox_persist.stream_head(path, NULL, now_ms) AS _on_stream_head_taken;
$p$;

CREATE OR REPLACE FUNCTION sandbox_persist._stream_path_taken(part integer, path text, now_ms bigint) RETURNS boolean
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM sandbox_persist._on_stream_head_taken(part, path, now_ms);
    RETURN true;
EXCEPTION WHEN others THEN
    RETURN SQLSTATE <> 'SP701';
END
$$;

-- create: on the path's shard, except a fork whose source lives on another
-- partition while the path is free on its own: then on the source's
-- partition, and the path is pinned there once the shard has created (or
-- found the identical) fork; a refused create pins nothing. A path taken on
-- its shard is not moved: the create goes there and the shard answers (200
-- for the identical stream, 409 otherwise, 404 for a source it does not
-- have). A pin is kept after the stream is deleted, and moved only by a
-- later fork create at the path while the path is free where it points.
-- Creates at one path serialise on a router advisory lock (held to the
-- caller's commit), so two creates racing at a free path cannot land on two
-- shards. run-logs/ paths and forks of them are refused by the shard they are
-- sent to (SP703), before any look-up.
CREATE OR REPLACE FUNCTION sandbox_persist._custom_stream_create(path text, content_type text, options json DEFAULT NULL::json, body bytea DEFAULT NULL::bytea, now_ms bigint DEFAULT NULL::bigint)
RETURNS json LANGUAGE plpgsql AS $$
DECLARE
    home integer;
    src text;
    src_part integer;
    r json;
BEGIN
    IF path IS NOT NULL AND NOT pg_catalog.starts_with(path, 'run-logs/') THEN
        PERFORM pg_catalog.pg_advisory_xact_lock(pg_catalog.hashtext('sandbox_persist.stream_create'),
                                                 pg_catalog.hashtext(path));
    END IF;
    home := sandbox_persist._partition(sandbox_persist._shard_of_stream(path));
    IF path IS NOT NULL AND NOT pg_catalog.starts_with(path, 'run-logs/')
       AND pg_catalog.json_typeof(options) = 'object'
       AND pg_catalog.strpos(options::text, '\u') = 0
       AND pg_catalog.json_typeof(options -> 'forkedFrom') = 'string' THEN
        src := options ->> 'forkedFrom';
    END IF;
    IF src IS NULL OR pg_catalog.starts_with(src, 'run-logs/') THEN
        RETURN sandbox_persist._on_stream_create(home, path, content_type, options, body, now_ms);
    END IF;
    src_part := sandbox_persist._partition(sandbox_persist._shard_of_stream(src));
    IF src_part = home OR sandbox_persist._stream_path_taken(home, path, now_ms) THEN
        RETURN sandbox_persist._on_stream_create(home, path, content_type, options, body, now_ms);
    END IF;
    r := sandbox_persist._on_stream_create(src_part, path, content_type, options, body, now_ms);
    INSERT INTO sandbox_persist.stream_placement (path, shard) VALUES (path, src_part)
    ON CONFLICT ON CONSTRAINT stream_placement_pkey DO UPDATE SET shard = EXCLUDED.shard;
    RETURN r;
END
$$;

CREATE OR REPLACE FUNCTION sandbox_persist._on_stream_append(part integer, path text, content_type text, body bytea, options json, now_ms bigint)
RETURNS json LANGUAGE plproxy AS $p$
    CLUSTER 'sandbox_persist_shards';
    RUN ON part;
    SELECT sandbox_persist.stream_append(path, content_type, body, options, now_ms) AS _on_stream_append;
$p$;

-- append: on the path's shard, then the shard's notification repeated. The
-- shard notifies an append that wrote (appended) or closed the stream, not a
-- duplicate; a close-only request on a stream already closed answers
-- `closed` too without notifying on the shard, and is notified here (the
-- answers do not tell the two apart): one spurious wake, nothing missed.
CREATE OR REPLACE FUNCTION sandbox_persist._custom_stream_append(path text, content_type text, body bytea, options json DEFAULT NULL::json, now_ms bigint DEFAULT NULL::bigint)
RETURNS json LANGUAGE plpgsql AS $$
DECLARE
    r json := sandbox_persist._on_stream_append(sandbox_persist._partition(sandbox_persist._shard_of_stream(path)),
                                                path, content_type, body, options, now_ms);
BEGIN
    IF r ->> 'outcome' IN ('appended', 'closed') THEN
        PERFORM pg_catalog.pg_notify('sandbox_persist_stream', r ->> 'streamId');
    END IF;
    RETURN r;
END
$$;

-- delete and, in the same statement, the stream's id (its result carries
-- none): the head is read first (the subquery is not flattened: it calls a
-- function that is not immutable), and refuses exactly what the delete would
-- (the same path checks, SP701 for no or an expired stream, SP702 for a
-- soft-deleted one, the same messages). A run-logs/ path is not headed (the
-- head would answer for the run's log): its delete is SP703 on its own.
-- Should another session delete the stream and create a new one at the path
-- between the head and the delete's row lock, the id notified is the old
-- stream's: the new stream's readers then wait for their timeout's re-read.
CREATE OR REPLACE FUNCTION sandbox_persist._on_stream_delete(part integer, path text, now_ms bigint)
RETURNS json LANGUAGE plproxy AS $p$
    CLUSTER 'sandbox_persist_shards';
    RUN ON part;
    SELECT pg_catalog.json_build_object('id', h.id, 'r', sandbox_persist.stream_delete(path, now_ms)) AS _on_stream_delete
    FROM (SELECT CASE WHEN pg_catalog.starts_with(path, 'run-logs/') THEN NULL
                      ELSE sandbox_persist.stream_head(path, NULL, now_ms) ->> 'streamId' END AS id
          OFFSET 0) AS h;
$p$;

CREATE OR REPLACE FUNCTION sandbox_persist._custom_stream_delete(path text, now_ms bigint DEFAULT NULL::bigint)
RETURNS json LANGUAGE plpgsql AS $$
DECLARE
    a json := sandbox_persist._on_stream_delete(sandbox_persist._partition(sandbox_persist._shard_of_stream(path)), path, now_ms);
BEGIN
    IF a ->> 'id' IS NOT NULL THEN
        PERFORM pg_catalog.pg_notify('sandbox_persist_stream', a ->> 'id');
    END IF;
    RETURN a -> 'r';
END
$$;
