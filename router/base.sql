-- sandbox_persist router: the fixed part (schema, placement, routing helpers).
--
-- Owns: the router database's schema sandbox_persist (the same name as the
-- extension's, so clients run unchanged), the PL/Proxy cluster
-- sandbox_persist_shards, the placement table written by thread moves, the
-- run -> thread cache, and the functions that turn a call's arguments into a
-- PL/Proxy hash (partition = hash & (partitions - 1)).
-- Locking rule: the router holds no lock across a call; placement rows are
-- written by the move orchestration once the destination shard has committed,
-- and the cache only ever gains immutable facts (a run's thread never changes).
-- Installed by router/install.sh; every statement is idempotent.

CREATE EXTENSION IF NOT EXISTS plproxy;
CREATE SCHEMA IF NOT EXISTS sandbox_persist;
REVOKE ALL ON SCHEMA sandbox_persist FROM PUBLIC;

-- A refresh starts from no functions, so a route removed from the table does
-- not linger; the tables (placement, cache) are kept.
DO $$
DECLARE
    f regprocedure;
BEGIN
    FOR f IN SELECT p.oid::regprocedure FROM pg_catalog.pg_proc p
             WHERE p.pronamespace = 'sandbox_persist'::regnamespace AND p.prokind IN ('f', 'p') LOOP
        -- ROUTINE: router/cross_shard.sql adds procedures too.
        EXECUTE format('DROP ROUTINE %s CASCADE', f);
    END LOOP;
END
$$;

-- Overrides of the hash placement: a moved thread's shard (a partition number).
CREATE TABLE IF NOT EXISTS sandbox_persist.thread_placement (
    thread_id text COLLATE "C" PRIMARY KEY,
    shard integer NOT NULL CHECK (shard >= 0)
);

-- A run's thread, learnt from the shards: event logs and run-driver locks go
-- to the shard of the run's thread, and a run id alone does not say which.
CREATE TABLE IF NOT EXISTS sandbox_persist.run_thread_cache (
    run_id text COLLATE "C" PRIMARY KEY,
    thread_id text COLLATE "C" NOT NULL
);
-- Open streamed uploads: the partition that holds each (the shard's upload id
-- is a UUID and is handed to the client unchanged). Removed at commit and
-- abort; a row of an upload the shard expired routes a late call to the shard
-- that answers SP302.
CREATE TABLE IF NOT EXISTS sandbox_persist.upload_placement (
    upload_id text COLLATE "C" PRIMARY KEY,
    shard integer NOT NULL CHECK (shard >= 0),
    begun_at timestamptz NOT NULL DEFAULT pg_catalog.now()
);
-- Overrides of the hash placement of durable streams: a fork lives on its
-- source's shard (it reads its source's entries there), so a fork whose path
-- hashes to another partition is pinned to the source's (a partition number).
-- Written by stream_create once the fork exists on that shard; kept after the
-- stream is deleted, so every later call at the path goes to the same shard.
CREATE TABLE IF NOT EXISTS sandbox_persist.stream_placement (
    path text COLLATE "C" PRIMARY KEY,
    shard integer NOT NULL CHECK (shard >= 0)
);
REVOKE ALL ON sandbox_persist.thread_placement, sandbox_persist.run_thread_cache,
    sandbox_persist.upload_placement, sandbox_persist.stream_placement FROM PUBLIC;

-- The PL/Proxy cluster's name, for functions that name it through a function
-- (router/cross_shard.sql's CLUSTER sandbox_persist._cluster_name()).
CREATE OR REPLACE FUNCTION sandbox_persist._cluster_name() RETURNS text
LANGUAGE sql IMMUTABLE AS $$
    SELECT 'sandbox_persist_shards'::text
$$;

-- The partition count of the cluster (a power of 2), from its server options.
CREATE OR REPLACE FUNCTION sandbox_persist._shard_count() RETURNS integer
LANGUAGE sql STABLE AS $$
    SELECT count(*)::integer
    FROM pg_catalog.pg_foreign_server s, pg_catalog.unnest(s.srvoptions) o
    WHERE s.srvname = 'sandbox_persist_shards' AND o ~ '^p[0-9]+='
$$;

-- The same count under the name router/cross_shard.sql uses.
CREATE OR REPLACE FUNCTION sandbox_persist._partition_count() RETURNS integer
LANGUAGE sql STABLE AS $$
    SELECT sandbox_persist._shard_count()
$$;

-- The shard of a thread: a placement override, else hashtext of its id. A
-- NULL id hashes like '' so the shard, not the router, reports the bad input.
CREATE OR REPLACE FUNCTION sandbox_persist._shard_of_thread(thread_id text) RETURNS integer
LANGUAGE sql STABLE AS $$
    SELECT coalesce((SELECT p.shard FROM sandbox_persist.thread_placement p
                     WHERE p.thread_id = $1),
                    pg_catalog.hashtext(coalesce($1, '')))
$$;

-- A member of a JSON object (a path of member names) as text, or NULL when
-- it is not there or cannot be read as text (\u0000, a lone surrogate, which
-- the json operators refuse): the shard then refuses the input with its own
-- code, so the router never answers bad input with an error of its own.
CREATE OR REPLACE FUNCTION sandbox_persist._json_text(doc json, VARIADIC path text[]) RETURNS text
LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
    -- Fast path: without a \u escape the operator cannot fail; the exception
    -- block (a subtransaction) is paid only by unusual input.
    IF pg_catalog.strpos(doc::text, '\u') = 0 THEN
        RETURN doc #>> path;
    END IF;
    BEGIN
        RETURN doc #>> path;
    EXCEPTION WHEN others THEN
        RETURN NULL;
    END;
END
$$;

-- The shard of the thread named by a JSON input's threadId.
CREATE OR REPLACE FUNCTION sandbox_persist._shard_of_thread_in(input json) RETURNS integer
LANGUAGE sql STABLE AS $$
    SELECT sandbox_persist._shard_of_thread(sandbox_persist._json_text($1, 'threadId'))
$$;

-- The shard of a fork's destination thread (where the fork root is written).
CREATE OR REPLACE FUNCTION sandbox_persist._shard_of_fork(input json) RETURNS integer
LANGUAGE sql STABLE AS $$
    SELECT sandbox_persist._shard_of_thread(sandbox_persist._json_text($1, 'destinationThreadId'))
$$;

-- The shard of a keyed record that belongs to no thread (instances, plain
-- blobs, plain locks).
CREATE OR REPLACE FUNCTION sandbox_persist._shard_of_key(record_key text) RETURNS integer
LANGUAGE sql IMMUTABLE AS $$
    SELECT pg_catalog.hashtext(coalesce($1, ''))
$$;

-- The shard of a metadata pair: both parts, length-prefixed so that
-- ('a:b','c') and ('a','b:c') stay different keys.
CREATE OR REPLACE FUNCTION sandbox_persist._shard_of_metadata(namespace text, meta_key text) RETURNS integer
LANGUAGE sql IMMUTABLE AS $$
    SELECT pg_catalog.hashtext(pg_catalog.length(coalesce($1, ''))::text || ':'
                               || coalesce($1, '') || coalesce($2, ''))
$$;

-- Whether a blob key is content-addressed (the same pattern as the shards').
CREATE OR REPLACE FUNCTION sandbox_persist._blob_is_addressed(blob_key text) RETURNS boolean
LANGUAGE sql IMMUTABLE AS $$
    SELECT coalesce($1 ~ '^sandbox-(files|artifacts)/sha256/[0-9a-f]{64}$', false)
$$;

-- The shard of an instance record: its key member.
CREATE OR REPLACE FUNCTION sandbox_persist._shard_of_instance_in(record json) RETURNS integer
LANGUAGE sql IMMUTABLE AS $$
    SELECT sandbox_persist._shard_of_key(sandbox_persist._json_text($1, 'key'))
$$;

-- The thread of a run as each shard sees it (NULL where the run is unknown).
CREATE OR REPLACE FUNCTION sandbox_persist._probe_run_thread(run_id text) RETURNS SETOF text
LANGUAGE plproxy AS $p$
    CLUSTER 'sandbox_persist_shards';
    RUN ON ALL;
    SELECT sandbox_persist.run_get(run_id) ->> 'threadId' AS _probe_run_thread;
$p$;

-- The shard of a run's thread: from the cache, else asked of every shard
-- (one parallel round trip, then cached: a run never changes thread), else
-- hashtext of the run id for a run no shard knows (an event log written before
-- its run record, or a run that does not exist).
CREATE OR REPLACE FUNCTION sandbox_persist._shard_of_run(run_id text) RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
    thread text;
BEGIN
    -- An id no run can have (empty, over 1024 bytes) is not looked up: the
    -- look-up would raise run_get's error instead of the caller's (a lock key
    -- 'run-driver:' is a valid lock key).
    IF coalesce($1, '') = '' OR pg_catalog.octet_length($1) > 1024 THEN
        RETURN pg_catalog.hashtext(coalesce($1, ''));
    END IF;
    SELECT c.thread_id INTO thread FROM sandbox_persist.run_thread_cache c WHERE c.run_id = $1;
    IF NOT FOUND THEN
        SELECT t INTO thread FROM sandbox_persist._probe_run_thread($1) AS t WHERE t IS NOT NULL LIMIT 1;
        IF thread IS NULL THEN
            RETURN pg_catalog.hashtext(coalesce($1, ''));
        END IF;
        INSERT INTO sandbox_persist.run_thread_cache (run_id, thread_id) VALUES ($1, thread)
        ON CONFLICT DO NOTHING;
    END IF;
    RETURN sandbox_persist._shard_of_thread(thread);
END
$$;

-- The shard of a lock: run-driver:<runId> lives with the run (maintenance
-- there checks it before ending the run's log), sandbox:<key> with the
-- instance (instance_gc_candidates checks it), any other key by its hash.
CREATE OR REPLACE FUNCTION sandbox_persist._shard_of_lock(lock_key text) RETURNS integer
LANGUAGE plpgsql AS $$
BEGIN
    IF pg_catalog.starts_with($1, 'run-driver:') THEN
        RETURN sandbox_persist._shard_of_run(pg_catalog.substr($1, 12));
    ELSIF pg_catalog.starts_with($1, 'sandbox:') THEN
        RETURN sandbox_persist._shard_of_key(pg_catalog.substr($1, 9));
    END IF;
    RETURN sandbox_persist._shard_of_key($1);
END
$$;

-- The shard of a durable stream path (docs/contract/streams.md): run-logs/<run_id>
-- is the read-only view of that run's event log, so it goes with the run;
-- any other path to its stream_placement pin (a fork pinned to its source's
-- shard), else hashtext of the path. A NULL path hashes like '' so the shard
-- reports it. The prefix test is the shard's: 'run-logs/' exactly, case-sensitive.
CREATE OR REPLACE FUNCTION sandbox_persist._shard_of_stream(path text) RETURNS integer
LANGUAGE plpgsql AS $$
BEGIN
    IF pg_catalog.starts_with($1, 'run-logs/') THEN
        RETURN sandbox_persist._shard_of_run(pg_catalog.substr($1, 10));
    END IF;
    RETURN coalesce((SELECT p.shard FROM sandbox_persist.stream_placement p WHERE p.path = $1),
                    pg_catalog.hashtext(coalesce($1, '')));
END
$$;

-- Merges of the per-shard results of a RUN ON ALL call; r is the array of
-- results in partition order.

-- The first non-null result (a record lives on one shard).
CREATE OR REPLACE FUNCTION sandbox_persist._merge_first(r json[]) RETURNS json
LANGUAGE sql IMMUTABLE AS $$
    SELECT x FROM pg_catalog.unnest($1) WITH ORDINALITY AS u(x, i) WHERE x IS NOT NULL ORDER BY i LIMIT 1
$$;

-- Whether any shard changed a row.
CREATE OR REPLACE FUNCTION sandbox_persist._merge_bool(r boolean[]) RETURNS boolean
LANGUAGE sql IMMUTABLE AS $$
    SELECT coalesce(bool_or(x), false) FROM pg_catalog.unnest($1) AS x
$$;

-- The total of per-shard counts.
CREATE OR REPLACE FUNCTION sandbox_persist._merge_sum(r integer[]) RETURNS integer
LANGUAGE sql IMMUTABLE AS $$
    SELECT coalesce(sum(x), 0)::integer FROM pg_catalog.unnest($1) AS x
$$;

-- The smallest per-shard value (one pg_cron job id per shard).
CREATE OR REPLACE FUNCTION sandbox_persist._merge_min(r bigint[]) RETURNS bigint
LANGUAGE sql IMMUTABLE AS $$
    SELECT min(x) FROM pg_catalog.unnest($1) AS x
$$;

-- run_claim: the shard that knows the run answers claimed or terminal; the
-- others answer unknown.
CREATE OR REPLACE FUNCTION sandbox_persist._merge_claim(r json[]) RETURNS json
LANGUAGE sql IMMUTABLE AS $$
    SELECT x FROM pg_catalog.unnest($1) WITH ORDINALITY AS u(x, i)
    ORDER BY (x ->> 'outcome' = 'unknown'), i LIMIT 1
$$;

-- JSON arrays merged in contract order: by a numeric member, then an optional
-- text member in byte order, then shard and position (so one shard's ties
-- keep its own insertion order); at most lim elements. Elements keep their
-- exact text (string_agg, not json_agg, which would respace them).
CREATE OR REPLACE FUNCTION sandbox_persist._merge_list(r json[], num_member text, text_member text DEFAULT NULL, lim integer DEFAULT NULL)
RETURNS json
LANGUAGE sql IMMUTABLE AS $$
    SELECT ('[' || coalesce(string_agg(s.e::text, ',' ORDER BY s.n, s.t, s.i, s.o), '') || ']')::json
    FROM (SELECT e, i, o, (e ->> num_member)::numeric AS n,
                 CASE WHEN text_member IS NULL THEN NULL ELSE (e ->> text_member) END COLLATE "C" AS t
          FROM pg_catalog.unnest(r) WITH ORDINALITY AS u(a, i),
               pg_catalog.json_array_elements(u.a) WITH ORDINALITY AS x(e, o)
          ORDER BY n, t, i, o
          LIMIT lim) AS s
$$;

-- checkpoint_list_blob_references: the references of every shard, summed per
-- key, keys in byte order (the global view; each shard's maintenance sees
-- only its own).
CREATE OR REPLACE FUNCTION sandbox_persist._merge_references(r json[]) RETURNS json
LANGUAGE sql IMMUTABLE AS $$
    SELECT ('[' || coalesce(string_agg('{"key":' || j || ',"references":' || c || '}', ',' ORDER BY k), '') || ']')::json
    FROM (SELECT (e ->> 'key') COLLATE "C" AS k, (array_agg(e -> 'key'))[1]::text AS j,
                 sum((e ->> 'references')::bigint) AS c
          FROM pg_catalog.unnest(r) AS a, pg_catalog.json_array_elements(a) AS e
          GROUP BY 1) AS s
$$;

-- maintain(): each member summed over the shards, in the first shard's order.
CREATE OR REPLACE FUNCTION sandbox_persist._merge_counts(r json[]) RETURNS json
LANGUAGE sql IMMUTABLE AS $$
    SELECT ('{' || string_agg(pg_catalog.to_json(k)::text || ':' || v::text, ',' ORDER BY pos) || '}')::json
    FROM (SELECT kv.key AS k, min(kv.ord) AS pos, sum((kv.value #>> '{}')::numeric) AS v
          FROM pg_catalog.unnest(r) AS a,
               pg_catalog.json_each(a) WITH ORDINALITY AS kv(key, value, ord)
          GROUP BY kv.key) AS s
$$;

-- Re-raise a shard's error as the shard raised it. PL/Proxy keeps the
-- SQLSTATE but writes "<function>(<n>): [<db>] REMOTE ERROR: " before the
-- message and "Remote detail: " before the detail; clients compare both. An
-- error of the router's own (no such prefix) returns, and the caller's RAISE
-- re-raises it unchanged.
CREATE OR REPLACE FUNCTION sandbox_persist._reraise(st text, m text, d text, h text) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    cm text;
    cd text;
    ch text;
BEGIN
    IF m IS NULL OR pg_catalog.strpos(m, 'REMOTE ERROR: ') = 0 THEN
        RETURN;
    END IF;
    cm := pg_catalog.regexp_replace(m, '^.*?REMOTE ERROR: ', '');
    cd := pg_catalog.regexp_replace(coalesce(d, ''), '^Remote detail: ', '');
    ch := pg_catalog.regexp_replace(coalesce(h, ''), '^Remote hint: ', '');
    IF cd = '' AND ch = '' THEN
        RAISE EXCEPTION USING ERRCODE = st, MESSAGE = cm;
    ELSIF ch = '' THEN
        RAISE EXCEPTION USING ERRCODE = st, MESSAGE = cm, DETAIL = cd;
    ELSIF cd = '' THEN
        RAISE EXCEPTION USING ERRCODE = st, MESSAGE = cm, HINT = ch;
    END IF;
    RAISE EXCEPTION USING ERRCODE = st, MESSAGE = cm, DETAIL = cd, HINT = ch;
END
$$;

-- The client clock gate on the router: a session (or database) that sets
-- sandbox_persist.allow_client_clock off on the router is refused a now_ms
-- here, as a shard would refuse it (SP901, the shard's message and detail);
-- unset, the shards' own setting decides. Settings of a router session never
-- reach the shards, so without this a SET on the router would change nothing.
-- Only a refusal is added: setting it on cannot grant what a shard refuses.
CREATE OR REPLACE FUNCTION sandbox_persist._check_client_clock(now_ms bigint) RETURNS void
LANGUAGE plpgsql STABLE AS $$
BEGIN
    IF now_ms IS NOT NULL
       AND NOT coalesce(pg_catalog.current_setting('sandbox_persist.allow_client_clock', true)::boolean, true) THEN
        RAISE EXCEPTION 'now_ms is not allowed' USING ERRCODE = 'SP901',
            DETAIL = 'The client clock is honoured only while sandbox_persist.allow_client_clock is on.',
            HINT = 'Omit now_ms, or have a superuser turn on sandbox_persist.allow_client_clock (tests only).';
    END IF;
END
$$;
