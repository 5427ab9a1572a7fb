-- A minimal router for test/shards/cross_shard.sh when it runs on its own
-- clusters (no router installed by the shard harness): the placement table,
-- _shard_of_thread, and PL/Proxy versions of the store functions the test
-- calls, routed by thread as the real router routes them. Expects psql
-- variables p0 and p1 (connection strings of shards 0 and 1).
CREATE EXTENSION IF NOT EXISTS plproxy;
CREATE SCHEMA IF NOT EXISTS sandbox_persist;
CREATE SERVER sandbox_persist FOREIGN DATA WRAPPER plproxy
    OPTIONS (connection_lifetime '1800', p0 :'p0', p1 :'p1');
CREATE USER MAPPING FOR PUBLIC SERVER sandbox_persist;

CREATE TABLE sandbox_persist.thread_placement (
    thread_id text COLLATE "C" PRIMARY KEY,
    shard     integer NOT NULL
);
CREATE FUNCTION sandbox_persist._shard_of_thread(thread_id text) RETURNS integer
LANGUAGE sql STABLE AS $$
    SELECT coalesce((SELECT shard FROM sandbox_persist.thread_placement p WHERE p.thread_id = $1),
                    hashtext($1))
$$;
CREATE FUNCTION sandbox_persist._cluster_name() RETURNS text
LANGUAGE sql IMMUTABLE AS $$ SELECT 'sandbox_persist'::text $$;

CREATE FUNCTION sandbox_persist.checkpoint_acquire_writer(thread_id text, lease_ms bigint DEFAULT NULL,
                                                          now_ms bigint DEFAULT NULL)
RETURNS json LANGUAGE plproxy AS $$
    CLUSTER 'sandbox_persist'; RUN ON sandbox_persist._shard_of_thread(thread_id);
$$;
CREATE FUNCTION sandbox_persist.checkpoint_append(input json, conversation json, now_ms bigint DEFAULT NULL)
RETURNS json LANGUAGE plproxy AS $$
    CLUSTER 'sandbox_persist'; RUN ON sandbox_persist._shard_of_thread(input->'checkpoint'->>'threadId');
$$;
CREATE FUNCTION sandbox_persist.checkpoint_list(thread_id text) RETURNS json LANGUAGE plproxy AS $$
    CLUSTER 'sandbox_persist'; RUN ON sandbox_persist._shard_of_thread(thread_id);
$$;
CREATE FUNCTION sandbox_persist.checkpoint_get_head(thread_id text) RETURNS text LANGUAGE plproxy AS $$
    CLUSTER 'sandbox_persist'; RUN ON sandbox_persist._shard_of_thread(thread_id);
$$;
CREATE FUNCTION sandbox_persist.message_load_thread(thread_id text) RETURNS json LANGUAGE plproxy AS $$
    CLUSTER 'sandbox_persist'; RUN ON sandbox_persist._shard_of_thread(thread_id);
$$;
CREATE FUNCTION sandbox_persist.message_save_thread(thread_id text, messages json) RETURNS void
LANGUAGE plproxy AS $$
    CLUSTER 'sandbox_persist'; RUN ON sandbox_persist._shard_of_thread(thread_id);
$$;
CREATE FUNCTION sandbox_persist.run_create_or_resume(input json) RETURNS json LANGUAGE plproxy AS $$
    CLUSTER 'sandbox_persist'; RUN ON sandbox_persist._shard_of_thread(input->>'threadId');
$$;
CREATE FUNCTION sandbox_persist.run_list_by_thread(thread_id text) RETURNS json LANGUAGE plproxy AS $$
    CLUSTER 'sandbox_persist'; RUN ON sandbox_persist._shard_of_thread(thread_id);
$$;
CREATE FUNCTION sandbox_persist.interrupt_create(record json) RETURNS boolean LANGUAGE plproxy AS $$
    CLUSTER 'sandbox_persist'; RUN ON sandbox_persist._shard_of_thread(record->>'threadId');
$$;
CREATE FUNCTION sandbox_persist.interrupt_list(thread_id text) RETURNS json LANGUAGE plproxy AS $$
    CLUSTER 'sandbox_persist'; RUN ON sandbox_persist._shard_of_thread(thread_id);
$$;
CREATE FUNCTION sandbox_persist.generation_run_create_or_resume(input json) RETURNS json
LANGUAGE plproxy AS $$
    CLUSTER 'sandbox_persist'; RUN ON sandbox_persist._shard_of_thread(input->>'threadId');
$$;
CREATE FUNCTION sandbox_persist.generation_run_find_latest_for_thread(thread_id text) RETURNS json
LANGUAGE plproxy AS $$
    CLUSTER 'sandbox_persist'; RUN ON sandbox_persist._shard_of_thread(thread_id);
$$;
CREATE FUNCTION sandbox_persist.artifact_save(record json) RETURNS void LANGUAGE plproxy AS $$
    CLUSTER 'sandbox_persist'; RUN ON sandbox_persist._shard_of_thread(record->>'threadId');
$$;
CREATE FUNCTION sandbox_persist.artifact_list_for_thread(thread_id text) RETURNS json
LANGUAGE plproxy AS $$
    CLUSTER 'sandbox_persist'; RUN ON sandbox_persist._shard_of_thread(thread_id);
$$;
CREATE FUNCTION sandbox_persist._fork_same_shard(input json, now_ms bigint)
RETURNS json LANGUAGE plproxy AS $$
    CLUSTER 'sandbox_persist'; RUN ON sandbox_persist._shard_of_thread(input->>'destinationThreadId');
    SELECT sandbox_persist.checkpoint_fork_from_checkpoint(input, now_ms);
$$;

-- Fallback until the generated router's own version: cross-shard forks go
-- through router/cross_shard.sql, same-shard forks to their shard.
CREATE FUNCTION sandbox_persist._fork_across_shards(input json, now_ms bigint DEFAULT NULL)
RETURNS json LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'cross-shard fork not installed' USING ERRCODE = 'feature_not_supported';
END
$$;
CREATE FUNCTION sandbox_persist.checkpoint_fork_from_checkpoint(input json, now_ms bigint DEFAULT NULL)
RETURNS json LANGUAGE plpgsql AS $$
DECLARE
    s integer;
    d integer;
BEGIN
    BEGIN
        s := sandbox_persist._shard_of_thread(input->>'sourceThreadId') & 1;
        d := sandbox_persist._shard_of_thread(input->>'destinationThreadId') & 1;
    EXCEPTION WHEN OTHERS THEN
        s := NULL;
    END;
    IF s IS NOT DISTINCT FROM d THEN
        RETURN sandbox_persist._fork_same_shard(input, now_ms);
    END IF;
    RETURN sandbox_persist._fork_across_shards(input, now_ms);
END
$$;
