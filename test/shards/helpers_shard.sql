-- Test-only, on every shard: run a query given as text (the fan-out tests on
-- the router read one shard's rows through shard_test.on_part).
CREATE SCHEMA IF NOT EXISTS shard_test;
CREATE OR REPLACE FUNCTION shard_test.exec(q text) RETURNS SETOF text
LANGUAGE plpgsql AS $$
BEGIN
    RETURN QUERY EXECUTE q;
END
$$;
