-- Test-only, on the router: one query on one partition, and a thread id of
-- each partition.
CREATE SCHEMA IF NOT EXISTS shard_test;
CREATE OR REPLACE FUNCTION shard_test.on_part(part integer, q text) RETURNS SETOF text
LANGUAGE plproxy AS $p$
    CLUSTER 'sandbox_persist_shards';
    RUN ON part;
    SELECT shard_test.exec(q) AS on_part;
$p$;

-- The first id '<prefix><n>' (n = 1, 2, ...) whose thread lives on partition part.
CREATE OR REPLACE FUNCTION shard_test.id_on(prefix text, part integer) RETURNS text
LANGUAGE sql STABLE AS $$
    SELECT prefix || g FROM generate_series(1, 1000) AS g
    WHERE sandbox_persist._partition(sandbox_persist._shard_of_thread(prefix || g)) = part
    ORDER BY g LIMIT 1
$$;

-- The first key '<prefix><n>' whose hash selects partition part.
CREATE OR REPLACE FUNCTION shard_test.key_on(prefix text, part integer) RETURNS text
LANGUAGE sql STABLE AS $$
    SELECT prefix || g FROM generate_series(1, 1000) AS g
    WHERE sandbox_persist._partition(sandbox_persist._shard_of_key(prefix || g)) = part
    ORDER BY g LIMIT 1
$$;
